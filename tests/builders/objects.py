"""Chainable builders of API objects (as kube-scheduler's ``pkg/scheduler/testing/wrappers.go``):
one per kind, each ending in ``raw()`` (API JSON as a watch delivers it) or ``info()`` (the
controller's record of it, through its own converter); the API JSON most shell tests start from."""

from __future__ import annotations

import copy
import dataclasses
import datetime
from typing import Any

from cogate import api
from cogate.controller.devices.records import device_claim_info
from cogate.controller.model import records
from cogate.controller.model.verdicts import GroupRequest
from cogate.controller.status.inputs import group_object
from cogate.models import PodGroup

GATE = api.DEFAULT_GATE_NAME
NS = "team"
HOSTNAME = "kubernetes.io/hostname"
#: The creationTimestamp of built pods and PodGroups unless set.
CREATED = "2024-01-01T00:00:00Z"


def iso(t: float) -> str:
    """Epoch seconds as an RFC 3339 UTC timestamp (microseconds only when there are some)."""
    d = datetime.datetime.fromtimestamp(t, datetime.timezone.utc)
    return d.strftime("%Y-%m-%dT%H:%M:%S") + (f".{d.microsecond:06d}" if d.microsecond else "") + "Z"


def _quantity(name: str, q: str | int | float) -> str:
    """A resource quantity: text as given; a number of CPUs (cores, ``0.5``) as millicores; any
    other number as a plain count (bytes for memory)."""
    if isinstance(q, str):
        return q
    return f"{round(q * 1000)}m" if name == "cpu" else str(int(q))


class _Builder:
    """A chainable builder of one API object: every setter returns the builder; ``raw()`` gives a
    copy of the object's API JSON, ``info()`` the controller's record of it (``_convert``)."""

    _convert: Any = None

    def __init__(self, obj: dict[str, Any]) -> None:
        self._obj = obj

    @property
    def _meta(self) -> dict[str, Any]:
        return self._obj["metadata"]

    def ns(self, namespace: str) -> Any:
        self._meta["namespace"] = namespace
        return self

    def uid(self, uid: str) -> Any:
        self._meta["uid"] = uid
        return self

    def labels(self, labels: dict[str, str] | None = None, **more: str) -> Any:
        """Add labels (``labels`` for keys that are not identifiers)."""
        self._meta.setdefault("labels", {}).update(labels or {}, **more)
        return self

    def annotations(self, annotations: dict[str, str] | None = None, **more: str) -> Any:
        """Add ``metadata.annotations``."""
        self._meta.setdefault("annotations", {}).update({**(annotations or {}), **more})
        return self

    def created(self, t: float | str | None) -> Any:
        """``metadata.creationTimestamp``: epoch seconds or RFC 3339 text; None: none."""
        if t is None:
            self._meta.pop("creationTimestamp", None)
        else:
            self._meta["creationTimestamp"] = t if isinstance(t, str) else iso(t)
        return self

    def deleting(self, at: float | str = CREATED) -> Any:
        """``metadata.deletionTimestamp``: epoch seconds or RFC 3339 text."""
        self._meta["deletionTimestamp"] = at if isinstance(at, str) else iso(at)
        return self

    def generation(self, n: int) -> Any:
        self._meta["generation"] = n
        return self

    def rv(self, resource_version: str | None) -> Any:
        """``metadata.resourceVersion``; None: none."""
        if resource_version is None:
            self._meta.pop("resourceVersion", None)
        else:
            self._meta["resourceVersion"] = resource_version
        return self

    def spec(self, **fields: Any) -> Any:
        """Set ``spec`` fields (API names, camelCase)."""
        self._obj["spec"].update(fields)
        return self

    def status(self, **fields: Any) -> Any:
        """Set ``status`` fields (API names, camelCase)."""
        self._obj.setdefault("status", {}).update(fields)
        return self

    def raw(self) -> dict[str, Any]:
        return copy.deepcopy(self._obj)

    def info(self) -> Any:
        return type(self)._convert(self.raw())


class PodBuilder(_Builder):
    """A v1 Pod: namespace :data:`NS`, uid ``uid-<name>``, created at :data:`CREATED`,
    resourceVersion 1, one container ``c`` with no request, ``Pending``, not gated.
    ``info()``: :func:`records.pod_info`."""

    _convert = staticmethod(records.pod_info)

    def __init__(self, name: str, namespace: str = NS) -> None:
        super().__init__({"metadata": {"name": name, "namespace": namespace, "uid": "uid-" + name,
                                       "creationTimestamp": CREATED, "resourceVersion": "1", "labels": {}},
                          "spec": {"containers": [{"name": "c", "image": "x"}]}, "status": {"phase": "Pending"}})

    def group(self, name: str) -> "PodBuilder":
        """A member of PodGroup ``name`` (its label)."""
        return self.labels({api.POD_GROUP_LABEL: name})

    def req(self, requests: dict[str, str | int | float] | None = None, **more: str | int | float) -> "PodBuilder":
        """Container requests: quantities as text, CPUs as a number of cores, other numbers as counts."""
        reqs = self._obj["spec"]["containers"][0].setdefault("resources", {}).setdefault("requests", {})
        for k, q in {**(requests or {}), **more}.items():
            reqs[k] = _quantity(k, q)
        return self

    def gated(self, *names: str) -> "PodBuilder":
        """``spec.schedulingGates``: ``names``, cogate's gate when none is given."""
        self._obj["spec"]["schedulingGates"] = [{"name": g} for g in names or (GATE,)]
        return self

    def on(self, node: str, phase: str = "Running") -> "PodBuilder":
        """Bound to ``node`` (``spec.nodeName``), in ``phase``."""
        self._obj["spec"]["nodeName"] = node
        return self.phase(phase)

    def created_on(self, node: str, phase: str = "Running", manager: str = "kubectl-create") -> "PodBuilder":
        """Created with ``spec.nodeName`` = ``node`` (never passed kube-scheduler), in ``phase``: the
        creator's ``managedFields`` entry owns ``f:spec.f:nodeName``, as the API server records it (a
        binding by kube-scheduler records none)."""
        self._meta.setdefault("managedFields", []).append(
            {"manager": manager, "operation": "Update", "fieldsV1": {"f:spec": {"f:nodeName": {}, "f:containers": {}}}})
        return self.on(node, phase)

    def phase(self, phase: str) -> "PodBuilder":
        return self.status(phase=phase)

    def priority(self, value: int) -> "PodBuilder":
        """``spec.priority`` (as the admission plugin resolves ``priorityClassName``)."""
        return self.spec(priority=value)

    def policy(self, preemption_policy: str) -> "PodBuilder":
        """``spec.preemptionPolicy`` (``PreemptLowerPriority`` or ``Never``)."""
        return self.spec(preemptionPolicy=preemption_policy)

    def started(self, t: float) -> "PodBuilder":
        """``status.startTime``, epoch seconds."""
        return self.status(startTime=iso(t))

    def owner(self, kind: str = "Job", name: str = "j", uid: str = "j1", api_version: str = "batch/v1") -> "PodBuilder":
        """A controller ``ownerReference``."""
        self._meta.setdefault("ownerReferences", []).append(
            {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": True})
        return self

    def affinity(self, affinity: dict[str, Any]) -> "PodBuilder":
        return self.spec(affinity=affinity)

    def pinned(self, node: str) -> "PodBuilder":
        """Required node affinity to ``node`` by name (``matchFields metadata.name In``), as a release pins."""
        return self.affinity({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}})

    def info(self, **fields: Any) -> records.PodInfo:
        """The record (:func:`records.pod_info`); ``fields``: record fields set on it afterwards, for
        the inputs of pure tests given as records (``host_ports``, ``topology_spread``, ...)."""
        info = records.pod_info(self.raw())
        return dataclasses.replace(info, **fields) if fields else info

    def nominated(self, node: str, by: str = "") -> "PodBuilder":
        """``status.nominatedNodeName``; ``by``: the field manager that wrote it (``managedFields``)."""
        if by:
            self._meta.setdefault("managedFields", []).append(
                {"manager": by, "operation": "Update", "subresource": "status",
                 "fieldsV1": {"f:status": {"f:nominatedNodeName": {}}}})
        return self.status(nominatedNodeName=node)


class NodeBuilder(_Builder):
    """A v1 Node: the ``kubernetes.io/hostname`` label (its name, as the kubelet sets it), ``pods: 110``
    allocatable, ``Ready``. ``info()``: :func:`records.node_info`."""

    _convert = staticmethod(records.node_info)

    def __init__(self, name: str) -> None:
        super().__init__({"metadata": {"name": name, "labels": {HOSTNAME: name}}, "spec": {},
                          "status": {"allocatable": {"pods": "110"},
                                     "conditions": [{"type": "Ready", "status": "True"}]}})

    def hostname(self, value: str | None) -> "NodeBuilder":
        """The ``kubernetes.io/hostname`` label: ``value``; None: no such label."""
        if value is None:
            self._meta["labels"].pop(HOSTNAME, None)
            return self
        return self.labels({HOSTNAME: value})

    def alloc(self, allocatable: dict[str, str | int | float] | None = None,
              **more: str | int | float) -> "NodeBuilder":
        """``status.allocatable``: quantities as text, CPUs as a number of cores, other numbers as counts."""
        for k, q in {**(allocatable or {}), **more}.items():
            self._obj["status"]["allocatable"][k] = _quantity(k, q)
        return self

    def cpu(self, q: str | int | float) -> "NodeBuilder":
        return self.alloc(cpu=q)

    def taint(self, key: str | records.Taint, value: str = "", effect: str = "NoSchedule") -> "NodeBuilder":
        """Append a taint: ``key``, ``value``, ``effect``, or a :class:`records.Taint`'s."""
        if isinstance(key, records.Taint):
            key, value, effect = key.key, key.value, key.effect
        self._obj["spec"].setdefault("taints", []).append({"key": key, "value": value, "effect": effect})
        return self

    def unschedulable(self) -> "NodeBuilder":
        return self.spec(unschedulable=True)

    def not_ready(self) -> "NodeBuilder":
        """The ``Ready`` condition ``False``."""
        return self.status(conditions=[{"type": "Ready", "status": "False"}])


class PodGroupBuilder(_Builder):
    """A PodGroup: namespace :data:`NS`, uid ``pg-uid-<name>``, minMember 2, created 2024-01-01,
    empty status. ``info()``: :func:`~cogate.controller.status.inputs.group_object`; ``obj()``: the
    :class:`~cogate.models.PodGroup` model."""

    _convert = staticmethod(group_object)

    def __init__(self, name: str = "pg", namespace: str = NS) -> None:
        super().__init__({"apiVersion": api.API_VERSION, "kind": api.KIND,
                          "metadata": {"name": name, "namespace": namespace, "uid": "pg-uid-" + name,
                                       "resourceVersion": "1", "creationTimestamp": CREATED},
                          "spec": {"minMember": 2}, "status": {}})

    def min_member(self, n: int) -> "PodGroupBuilder":
        return self.spec(minMember=n)

    def timeout(self, seconds: int) -> "PodGroupBuilder":
        return self.spec(scheduleTimeoutSeconds=seconds)

    def obj(self) -> PodGroup:
        return PodGroup.from_api(self.raw())


class ClaimBuilder(_Builder):
    """A resource.k8s.io ResourceClaim: namespace ``default``, no device request, no status.
    ``info()``: :func:`~cogate.controller.devices.records.device_claim_info`."""

    _convert = staticmethod(device_claim_info)

    def __init__(self, name: str, namespace: str = "default") -> None:
        super().__init__({"metadata": {"name": name, "namespace": namespace},
                          "spec": {"devices": {"requests": []}}, "status": {}})

    def request(self, *requests: dict[str, Any]) -> "ClaimBuilder":
        """Append device requests (API JSON)."""
        self._obj["spec"]["devices"]["requests"].extend(requests)
        return self

    def devices(self, **fields: Any) -> "ClaimBuilder":
        """Set other ``spec.devices`` fields (``constraints``, ``config``)."""
        self._obj["spec"]["devices"].update(fields)
        return self

    def allocated(self, driver: str, pool: str, device: str, request: str = "gpu") -> "ClaimBuilder":
        """Append an allocation result (``status.allocation.devices.results``)."""
        alloc = self._obj["status"].setdefault("allocation", {"devices": {"results": []}})
        alloc["devices"]["results"].append({"request": request, "driver": driver, "pool": pool, "device": device})
        return self

    def reserved_for(self, *pod_uids: str) -> "ClaimBuilder":
        """``status.reservedFor``: pods by uid (their name taken to be the uid)."""
        self._obj["status"].setdefault("reservedFor", []).extend(
            {"resource": "pods", "name": u, "uid": u} for u in pod_uids)
        return self


def pod(name: str, namespace: str = NS) -> PodBuilder:
    return PodBuilder(name, namespace)


def node(name: str) -> NodeBuilder:
    return NodeBuilder(name)


def podgroup(name: str = "pg", namespace: str = NS) -> PodGroupBuilder:
    return PodGroupBuilder(name, namespace)


def claim(name: str, namespace: str = "default") -> ClaimBuilder:
    return ClaimBuilder(name, namespace)


def group_request(members: Any, min_member: int | None = None, *, name: str = "g", created: float = 0.0,
                  released: bool = False, ns: str | None = None) -> GroupRequest:
    """The planner's view of a PodGroup of ``members`` (records): minMember all of them unless
    given; namespace the first member's (:data:`NS` without members)."""
    members = tuple(members)
    ns = ns if ns is not None else (members[0].namespace if members else NS)
    return GroupRequest(ns, name, len(members) if min_member is None else min_member, created, released, members)


def raw_pod(name: str, *, group: str | None = "pg", gates=(GATE,), node: str = "", phase: str = "Pending",
            cpu: str = "1", created: str = CREATED, affinity: dict | None = None,
            owner: bool = False, rv: str = "1") -> dict[str, Any]:
    b = pod(name).req(cpu=cpu).phase(phase).created(created).rv(rv)
    if group:
        b.group(group)
    if owner:
        b.owner()
    if gates:
        b.gated(*gates)
    if node:
        b.spec(nodeName=node)
    if affinity:
        b.affinity(affinity)
    return b.raw()


def raw_pg(name: str = "pg", min_member: int = 2, status: dict | None = None, timeout: int | None = None):
    b = podgroup(name).min_member(min_member).status(**(status or {}))
    if timeout is not None:
        b.timeout(timeout)
    return b.raw()


def ready_node(name: str, cpu: str = "64", labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return node(name).hostname(None).cpu(cpu).labels(labels or {"zone": "a"}).spec(**spec).raw()
