"""Shared test builders and fakes (as Kueue's ``pkg/util/testingjobs`` and kube-scheduler's
``pkg/scheduler/testing/wrappers.go``): one chainable builder per object kind, an in-memory fake
of the client APIs the controller calls, informers over fixed lists, and two reconcilers wired to
them: :class:`Harness` (a scripted ``decide``) and :class:`World` (the real planner).

- :func:`pod`, :func:`node`, :func:`podgroup`, :func:`claim`: chainable builders, e.g.
  ``pod("a").group("g").req(cpu="2").gated().on("n1").priority(10)``, ending in ``.raw()`` (API
  JSON as a watch delivers it) or ``.info()`` (the record, through the controller's own converter:
  :func:`~cogate.controller.model.records.pod_info`, ``node_info``, ``group_object``,
  ``device_claim_info``); :func:`group_request`: a :class:`GroupRequest` over built members;
- :func:`raw_pod`, :func:`raw_pg`, :func:`ready_node`: the API JSON most shell tests start from
  (thin wrappers of the builders);
- :class:`FakeCluster`: ``CoreV1Api`` + ``CustomObjectsApi`` subset, pods patched with real
  JSON Patch semantics, scripted HTTP errors (:class:`ApiError`), a shared call log;
  :class:`StatusCluster`: plus nodes and the pod status subresource (nominations, marks);
- :func:`informer`: an :class:`~cogate.controller.kube.informer.Informer` listed once from items;
  :func:`caches_from`: the four informers of a pass over item sources;
- :class:`Harness` and :func:`verdict`: a reconciler pass against the fakes, ``decide`` scripted;
- :class:`World`: a reconciler with the real planner over a :class:`StatusCluster`, the informers
  relisted from it around every pass (the watch's view).
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import re

from typing import Any

import jsonpatch

from cogate import api
from cogate.controller.devices.records import device_claim_info
from cogate.controller.model import records
from cogate.controller.model.verdicts import GroupRequest
from cogate.controller.model.config import ReconcilerConfig
from cogate.controller.kube.events import EventRecorder
from cogate.controller.kube.informer import Caches, Informer, name_key, namespaced_key, uid_key
from cogate.controller.status.inputs import group_object
from cogate.controller.kube.metrics import Metrics
from cogate.controller.planning.planner import Decision, GroupVerdict
from cogate.controller.reconciler import Reconciler

from cogate.models import PodGroup

GATE = api.DEFAULT_GATE_NAME
NS = "team"
HOSTNAME = "kubernetes.io/hostname"
#: The creationTimestamp of built pods and PodGroups unless set.
CREATED = "2024-01-01T00:00:00Z"

class ApiError(Exception):
    def __init__(self, status: int, msg: str = "") -> None:
        super().__init__(f"HTTP {status} {msg}")
        self.status = status


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

    def alloc(self, allocatable: dict[str, str | int | float] | None = None, **more: str | int | float) -> "NodeBuilder":
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


class FakeCluster:
    """CoreV1Api + CustomObjectsApi subset: pods and PodGroups in dicts; a shared call log."""

    def __init__(self, pods: list[dict], pgs: list[dict]) -> None:
        self.pods = {p["metadata"]["name"]: p for p in pods}
        self.pgs = {p["metadata"]["name"]: p for p in pgs}
        self.log: list[tuple[str, str]] = []
        self.pod_errors: dict[str, list[Exception]] = {}
        self.dry_errors: dict[str, list[Exception]] = {}
        self.reads: dict[str, int] = {}
        self.deleted: list[str] = []
        self.status_errors: list[Exception] = []
        self.evicted: list[str] = []
        self.rv = 100

    def _bump(self, obj: dict) -> None:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)

    # CoreV1Api
    def read_namespaced_pod(self, name, namespace, **_):
        self.reads[name] = self.reads.get(name, 0) + 1
        if name not in self.pods:
            raise ApiError(404)
        return jsonpatch.apply_patch(self.pods[name], [])  # a copy

    def patch_namespaced_pod(self, name, namespace, body, **kw):
        assert kw["_content_type"] == "application/json-patch+json"
        dry = kw.get("dry_run") == "All"
        errors = (self.dry_errors if dry else self.pod_errors).get(name)
        if errors:
            raise errors.pop(0)
        try:
            new = jsonpatch.apply_patch(self.pods[name], body)
        except jsonpatch.JsonPatchException as exc:
            raise ApiError(422, str(exc)) from None
        if dry:
            self.log.append(("dry-run", name))
            return new
        self._bump(new)
        self.pods[name] = new
        self.log.append(("pod", name))
        return new

    def create_namespaced_pod_eviction(self, name, namespace, body, **_):
        self.evicted.append(name)

    def delete_namespaced_pod(self, name, namespace, body=None, **_):
        if name not in self.pods:
            raise ApiError(404)
        self.deleted.append(name)
        del self.pods[name]

    # CustomObjectsApi
    def patch_namespaced_custom_object_status(self, group, version, namespace, plural, name, body, **kw):
        assert (group, version, plural) == (api.GROUP, api.VERSION, api.PLURAL)
        assert kw["_content_type"] == "application/merge-patch+json"
        if self.status_errors:
            raise self.status_errors.pop(0)
        pg = self.pgs[name]
        pg["status"] = jsonpatch.apply_patch(pg, [])["status"] | body["status"]
        pg["status"] = {k: v for k, v in pg["status"].items() if v is not None}
        self._bump(pg)
        self.log.append(("status", name))
        return jsonpatch.apply_patch(pg, [])


def informer(name, items, key, convert) -> Informer:
    inf = Informer(name, lambda: (items, "1"), lambda rv: iter(()), key, convert)
    inf._relist()
    return inf


def caches_from(pods, pgs, nodes) -> Caches:
    """The four informers of a pass (not yet listed), each listing from a callable giving API JSON:
    ``pgs()`` PodGroups, ``pods()`` pods (members: labelled; bound: with a node), ``nodes()`` nodes."""

    def make(name, items, key, convert) -> Informer:
        return Informer(name, lambda: (items(), "1"), lambda rv: iter(()), key, convert)

    return Caches(
        podgroups=make("pg", pgs, namespaced_key, group_object),
        members=make("members", lambda: [p for p in pods() if p["metadata"]["labels"]], uid_key, records.pod_info),
        bound=make("bound", lambda: [p for p in pods() if p["spec"].get("nodeName")], uid_key, records.pod_info),
        nodes=make("nodes", nodes, name_key, records.node_info),
    )


def bound_convert(raw):
    p = records.pod_info(raw)
    if not p.bound or p.terminal:
        raise ValueError("not bound")
    return p


def ready_node(name: str, cpu: str = "64", labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return node(name).hostname(None).cpu(cpu).labels(labels or {"zone": "a"}).spec(**spec).raw()


#: A relayed Event's message (:func:`cogate.controller.release.relays.relayed`).
RELAYED = re.compile(r"PodGroup [^/\s]+/[^:\s]+: ")


class Harness:
    def __init__(self, pods, pgs, verdicts, *, placement="pinned", evict=False, now=1_704_067_300.0):
        self.cluster = FakeCluster(pods, pgs)
        #: Events as ``(type, reason, message)``, but those relayed to owners and members
        #: (:mod:`cogate.controller.release.relaying`), which are in ``relayed`` as ``(kind, name, type, reason, message)``.
        self.events: list[tuple[str, str, str]] = []
        self.relayed: list[tuple[str, str, str, str, str]] = []
        self.decide_calls: list[dict] = []
        self.verdicts = verdicts
        self.now = now
        pgs, nodes = list(self.cluster.pgs.values()), [ready_node(n) for n in ("n1", "n2", "n3")]
        caches = caches_from(lambda: pods, lambda: pgs, lambda: nodes)  # listed once, as given
        for inf in caches.all():
            inf._relist()
        self.caches = caches
        recorder = EventRecorder(self._event, lambda *a: None, clock=lambda: self.now)
        self.recorder = recorder
        self.rec = Reconciler(self.cluster, self.cluster, caches,
                              ReconcilerConfig(placement=placement, evict_on_timeout=evict, max_patch_attempts=4),
                              recorder=recorder, metrics=Metrics(), decide=self.decide,
                              clock=lambda: self.now, monotonic=lambda: self.now, sleep=lambda s: None)

    def _event(self, namespace, body):
        obj = body["involvedObject"]
        if obj["kind"] != "PodGroup" and RELAYED.match(body["message"]):
            self.relayed.append((obj["kind"], obj["name"], body["type"], body["reason"], body["message"]))
        else:
            self.events.append((body["type"], body["reason"], body["message"]))

    def decide(self, nodes, pods, groups, reservations, now, config):
        self.decide_calls.append({"nodes": nodes, "pods": pods, "groups": groups, "reservations": reservations})
        v = self.verdicts(groups) if callable(self.verdicts) else self.verdicts
        return Decision(verdicts=tuple(v), reservations=())

    def run(self):
        res = self.rec.reconcile_once()
        self.recorder.flush()
        return res


def verdict(outcome, release=None, fits=0, message="", name="pg"):
    return GroupVerdict(NS, name, outcome, release or {}, fits, message)


#: The time a :class:`World` starts at (2024-01-01T00:01:40Z), epoch seconds.
T0 = 1_704_067_300.0


class StatusCluster(FakeCluster):
    """FakeCluster plus nodes (``nodes``, by name, a test may change them), the pod status
    subresource (strategic merge: conditions by type; ``nominatedNodeName`` recorded in
    ``managedFields`` as the API server does) and a DELETE answering the pod with its grace period.
    ``calls``: the writes in order, ``(verb, name)``: ``("nominate", "pod=node")``, ``("mark", pod)``
    and ``(delete_call, pod)``; ``keep_deleted``: victims stay (terminating) after DELETE."""

    #: The verb a pod DELETE is logged under in ``calls``, and the grace period it answers.
    delete_call = "delete"
    grace = 5
    #: Whether status writes (nominations, marks) are logged in ``calls``.
    log_status = True

    def __init__(self, pods, pgs, nodes=(), clock=None) -> None:
        super().__init__(pods, pgs)
        self.nodes = {n["metadata"]["name"]: n for n in nodes}
        self.clock = clock
        self.calls: list[tuple[str, str]] = []
        self.keep_deleted = False

    def patch_namespaced_pod_status(self, name, namespace, body, **kw):
        assert kw["_content_type"] == "application/strategic-merge-patch+json"
        assert kw["field_manager"] == "cogate-controller"
        pod = self.pods.get(name)
        if pod is None:
            raise ApiError(404)
        assert body["metadata"]["uid"] == pod["metadata"]["uid"]
        status = pod.setdefault("status", {})
        for k, v in body["status"].items():
            if k == "conditions":
                have = {c["type"]: c for c in status.get("conditions", [])}
                for c in v:
                    have[c["type"]] = c
                status["conditions"] = list(have.values())
            elif v is None:
                status.pop(k, None)
            else:
                status[k] = v
        if "nominatedNodeName" in body["status"]:  # server-side field management, as the API server keeps it
            entries = [e for e in pod["metadata"].get("managedFields", []) if e["manager"] != kw["field_manager"]]
            if body["status"]["nominatedNodeName"]:
                entries.append({"manager": kw["field_manager"], "operation": "Update", "subresource": "status",
                                "fieldsV1": {"f:status": {"f:nominatedNodeName": {}}}})
            pod["metadata"]["managedFields"] = entries
        self._bump(pod)
        if self.log_status:
            what = "nominate" if "nominatedNodeName" in body["status"] else "mark"
            self.calls.append((what, f"{name}={body['status'].get('nominatedNodeName')}" if what == "nominate"
                               else name))
        return copy.deepcopy(pod)

    def delete_namespaced_pod(self, name, namespace, body=None, **_):
        if name not in self.pods:
            raise ApiError(404)
        self.calls.append((self.delete_call, name))
        self.deleted.append(name)
        pod = self.pods[name]
        if self.keep_deleted:
            pod["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
            pod["metadata"]["deletionGracePeriodSeconds"] = self.grace
            return copy.deepcopy(pod)
        del self.pods[name]
        return {"metadata": {"name": name, "deletionGracePeriodSeconds": self.grace}}


class World:
    """A reconciler with the real planner over a :class:`StatusCluster` (``cluster_class``, or the
    ``cluster`` given: an instance is a restarted controller's world, the same one);
    :meth:`run` relists the informers from the fake first (the watch's view), runs one pass and
    relists again. Events are kept as ``(type, reason, involved object's name, message)``.

    ``nodes``: API JSON; ``preemption``, ``provisioning_class``, ``workers``: the flags;
    ``nominated``: the nominated-pods informer as ``controller/main.py`` has it; ``decide``: the
    planner entry (None: the reconciler's planning state)."""

    cluster_class: type[StatusCluster] = StatusCluster
    #: The PodGroup condition :meth:`condition` reads unless told.
    condition_type = "Preempting"

    def __init__(self, pods, pgs, *, nodes=(ready_node("n1", "4"),), preemption=True, provisioning_class=None,
                 workers=None, decide=None, nominated=False, cluster: StatusCluster | type[StatusCluster] | None = None,
                 now=T0, **more) -> None:
        self._args = dict(nodes=nodes, preemption=preemption, provisioning_class=provisioning_class,
                          workers=workers, decide=decide, nominated=nominated, **more)
        self.now = now
        if isinstance(cluster, StatusCluster):
            self.cluster = cluster
        else:
            self.cluster = (cluster or self.cluster_class)(pods, pgs, list(nodes), lambda: self.now)
        c = self.cluster
        self.events: list[tuple[str, str, str, str]] = []
        self.caches = caches_from(lambda: list(c.pods.values()), lambda: list(c.pgs.values()),
                                  lambda: list(c.nodes.values()))
        if nominated:  # as controller/main.py has it: unbound pods with a nomination promise room
            # controller/main.py's selector: unbound pods outside every group (a gang's own members'
            # nominations are cogate's preemption plan, held as its room, not promised to others)
            self.caches.nominated = Informer(
                "nominated", lambda: ([p for p in c.pods.values() if not p["spec"].get("nodeName")
                                       and api.POD_GROUP_LABEL not in p["metadata"]["labels"]], "1"),
                lambda rv: iter(()), uid_key, records.nominated_pod_info)
        self.more_caches(**more)
        self.relist()
        self.recorder = EventRecorder(
            lambda ns, b: self.events.append((b["type"], b["reason"], b["involvedObject"]["name"], b["message"])),
            lambda *a: None, clock=lambda: self.now)
        self.metrics = Metrics()
        flags = {"provisioning_class": provisioning_class} if provisioning_class else {}
        flags |= {"workers": workers} if workers else {}
        self.rec = Reconciler(c, c, self.caches, ReconcilerConfig(preemption=preemption, max_patch_attempts=2, **flags),
                              recorder=self.recorder, metrics=self.metrics, clock=lambda: self.now,
                              monotonic=lambda: self.now, sleep=lambda s: None, decide=decide)
        self.caches.members.add_handler(self.rec.on_member_event)  # as controller/main.py does

    def more_caches(self, **more) -> None:
        """A subclass's further informers (over ``self.cluster``), set on ``self.caches``; ``more``:
        the subclass's own keyword arguments."""
        assert not more, more

    def restarted(self) -> "World":
        """A new process (fresh caches, memory and metrics) on the same cluster, at the same time."""
        return type(self)([], [], cluster=self.cluster, now=self.now, **self._args)

    def relist(self) -> None:
        for inf in self.caches.all():
            inf._relist()

    def run(self, dt: float = 0.0) -> None:
        self.now += dt
        self.relist()
        self.rec.reconcile_once()
        self.recorder.flush()
        self.relist()

    def bind(self, name: str, node_name: str | None = None) -> None:
        """kube-scheduler binds a released member to the node it is pinned to (or ``node_name``)."""
        p = self.cluster.pods[name]
        assert not p["spec"].get("schedulingGates"), f"{name} is still gated"
        p["spec"]["nodeName"] = node_name or pinned(p)
        p["status"]["phase"] = "Running"
        self.cluster._bump(p)

    def gated(self, name: str) -> bool:
        """Pod ``name`` still carries cogate's gate."""
        return GATE in [g["name"] for g in self.cluster.pods[name]["spec"].get("schedulingGates") or ()]

    def condition(self, pg: str = "pg", type_: str | None = None) -> dict | None:
        """PodGroup ``pg``'s condition ``type_`` (:attr:`condition_type` unless given), None without one."""
        type_ = type_ or self.condition_type
        return next((c for c in self.cluster.pgs[pg]["status"].get("conditions", []) if c["type"] == type_), None)

    def metric(self, name, **labels) -> float:
        return self.metrics.registry.get_sample_value(name, labels) or 0.0

    def reasons(self, reason: str) -> list[tuple[str, str, str, str]]:
        """The Events of ``reason``."""
        return [e for e in self.events if e[1] == reason]


def pinned(p: dict) -> str:
    """The node a released pod is pinned to (its required node affinity's ``metadata.name In``)."""
    terms = p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    (value,) = {v for t in terms for f in t.get("matchFields", ()) if f["operator"] == "In" for v in f["values"]}
    return value
