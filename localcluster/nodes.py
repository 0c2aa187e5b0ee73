"""Fake nodes on demand, kept alive by kwok.

A node built by :func:`node_manifest` carries the annotation ``kwok.x-k8s.io/node: fake``,
which the kwok process of :class:`~cogate.localcluster.cluster.LocalCluster` selects
(``--manage-nodes-with-annotation-selector``): kwok marks it Ready, renews its Lease and
runs the pods bound to it (``kwok-stages.yaml``). So a node created any way from such a
manifest (``kubectl apply``, the Python client, :func:`add_nodes`) becomes Ready by itself.

By default each node is tainted ``kwok.x-k8s.io/node=fake:NoSchedule`` so that only pods
tolerating it land there (``kwok_taint=False`` omits it). Capacity equals allocatable:
``cpu`` and ``memory`` are Kubernetes quantities (``"10"``, ``"500m"``, ``"8Gi"``), ``pods``
an integer, ``extended`` maps extended resources to quantities (``{"nvidia.com/gpu": 4}``).
"""

from __future__ import annotations

import re
import time
from typing import Any, Iterable, Mapping, Sequence

__all__ = ["KWOK_ANNOTATION", "KWOK_TAINT", "CONDITION_TAINTS", "node_manifest", "add_nodes", "wait_nodes_ready", "node_ready",
           "NodeError"]

#: Annotation kwok selects nodes by (key, value).
KWOK_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
#: Taint put on kwok nodes by default.
KWOK_TAINT = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}

_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUANTITY = re.compile(r"^[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


class NodeError(RuntimeError):
    """Nodes did not become Ready in time; the message names them and their conditions."""


def _quantity(value: Any, field: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"{field}: expected a quantity string or integer, got {value!r}")
    text = str(value)
    if not _QUANTITY.match(text):
        raise ValueError(f"{field}: {text!r} is not a Kubernetes quantity")
    return text


def node_manifest(
    name: str,
    cpu: str | int = "10",
    memory: str | int = "8Gi",
    pods: int = 110,
    extended: Mapping[str, str | int] | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] | None = None,
    *,
    kwok_taint: bool = True,
    annotations: Mapping[str, str] | None = None,
    unschedulable: bool = False,
) -> dict[str, Any]:
    """The API object (dict, apiVersion v1 kind Node) of a kwok-managed fake node.

    Labels: ``type: kwok``, ``kubernetes.io/hostname: <name>``, ``kubernetes.io/os: linux``,
    ``kubernetes.io/arch: amd64``, then ``labels`` (which may override them). Taints:
    :data:`KWOK_TAINT` unless ``kwok_taint=False``, then ``taints`` (dicts with ``key``,
    optional ``value``, ``effect``). ``status.capacity`` = ``status.allocatable`` = cpu,
    memory, pods and ``extended``.
    Raises ``ValueError`` naming the bad field (name not a DNS-1123 subdomain, bad quantity,
    unknown taint effect, ...).
    """
    if not isinstance(name, str) or len(name) > 253 or not _DNS1123_SUBDOMAIN.match(name):
        raise ValueError(f"name: {name!r} is not a valid node name (DNS-1123 subdomain)")
    if isinstance(pods, bool) or not isinstance(pods, int) or pods < 0:
        raise ValueError(f"pods: expected a non-negative integer, got {pods!r}")
    resources = {"cpu": _quantity(cpu, "cpu"), "memory": _quantity(memory, "memory"), "pods": str(pods)}
    for res, qty in (extended or {}).items():
        if not isinstance(res, str) or not res or res in resources:
            raise ValueError(f"extended: bad or duplicate resource name {res!r}")
        resources[res] = _quantity(qty, f"extended[{res}]")
    all_labels = {"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                  "kubernetes.io/arch": "amd64"}
    for k, v in (labels or {}).items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise ValueError(f"labels: keys and values must be strings, got {k!r}: {v!r}")
        all_labels[k] = v
    all_taints: list[dict[str, str]] = [dict(KWOK_TAINT)] if kwok_taint else []
    for i, t in enumerate(taints or ()):
        if not isinstance(t, Mapping) or not isinstance(t.get("key"), str) or not t.get("key"):
            raise ValueError(f"taints[{i}]: expected a mapping with a non-empty 'key', got {t!r}")
        if t.get("effect") not in _EFFECTS:
            raise ValueError(f"taints[{i}].effect: expected one of {_EFFECTS}, got {t.get('effect')!r}")
        taint = {"key": t["key"], "effect": t["effect"]}
        if t.get("value"):
            taint["value"] = str(t["value"])
        all_taints.append(taint)
    spec: dict[str, Any] = {}
    if all_taints:
        spec["taints"] = all_taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_ANNOTATION[0]: KWOK_ANNOTATION[1], **(annotations or {})},
            "labels": all_labels,
        },
        "spec": spec,
        "status": {"capacity": dict(resources), "allocatable": dict(resources)},
    }


def _api(api_or_cluster: Any):
    """An ApiClient from a LocalCluster (anything with ``api_client()``) or an ApiClient itself."""
    if hasattr(api_or_cluster, "api_client") and callable(api_or_cluster.api_client):
        return api_or_cluster.api_client(), True
    return api_or_cluster, False


#: Taints the node lifecycle controller (TaintNodesByCondition) puts on a node that is not
#: (yet) Ready; it removes them shortly after the Ready condition turns True.
CONDITION_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def node_ready(node: Mapping[str, Any]) -> bool:
    """True when the node dict's ``Ready`` condition is ``"True"`` and the node lifecycle
    controller has removed its :data:`CONDITION_TAINTS` (until then kube-scheduler, and
    cogate's planner, treat the node as not schedulable)."""
    if any(t.get("key") in CONDITION_TAINTS for t in (node.get("spec") or {}).get("taints") or []):
        return False
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def wait_nodes_ready(api_or_cluster: Any, names: Iterable[str], timeout: float = 60.0) -> None:
    """Wait until every node in ``names`` is Ready per :func:`node_ready` (Ready condition True,
    no not-ready/unreachable taint); raises :class:`NodeError` after ``timeout`` s."""
    from kubernetes import client

    api, owned = _api(api_or_cluster)
    core = client.CoreV1Api(api)
    pending = set(names)
    deadline = time.monotonic() + timeout
    last: dict[str, Any] = {}
    try:
        while pending:
            for node in core.list_node().items:
                d = api.sanitize_for_serialization(node)
                if d["metadata"]["name"] in pending:
                    last[d["metadata"]["name"]] = {
                        "conditions": {c.get("type"): c.get("status") for c in (d.get("status") or {}).get("conditions") or []},
                        "taints": [t.get("key") for t in (d.get("spec") or {}).get("taints") or []]}
                    if node_ready(d):
                        pending.discard(d["metadata"]["name"])
            if not pending:
                return
            if time.monotonic() >= deadline:
                raise NodeError(f"nodes not Ready after {timeout:.0f}s: "
                                + ", ".join(f"{n} ({last.get(n)!r})" for n in sorted(pending))
                                + "; is kwok running and does the node carry the kwok annotation?")
            time.sleep(0.1)
    finally:
        if owned:
            api.close()


def add_nodes(api_or_cluster: Any, count: int, *, prefix: str = "kwok-node-", timeout: float = 60.0,
              **shape: Any) -> list[str]:
    """Create ``count`` fake nodes named ``<prefix><i>`` (first free indices from 0) and wait until Ready.

    ``api_or_cluster``: a LocalCluster or a ``kubernetes.client.ApiClient``. ``shape``: keyword
    arguments of :func:`node_manifest` (cpu, memory, pods, extended, labels, taints, kwok_taint, ...).
    Returns the node names. Raises ``ValueError`` on a bad shape, :class:`NodeError` on timeout,
    ``kubernetes.client.ApiException`` when the API refuses a node.
    """
    from kubernetes import client

    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"count: expected a non-negative integer, got {count!r}")
    api, owned = _api(api_or_cluster)
    try:
        core = client.CoreV1Api(api)
        existing = {n.metadata.name for n in core.list_node().items}
        names: list[str] = []
        i = 0
        while len(names) < count:
            if f"{prefix}{i}" not in existing:
                names.append(f"{prefix}{i}")
            i += 1
        manifests = [node_manifest(n, **shape) for n in names]  # validate all before creating any
        for body in manifests:
            core.create_node(body)
        wait_nodes_ready(api, names, timeout)
        return names
    finally:
        if owned:
            api.close()
