"""Shared test builders and fakes (as Kueue's ``pkg/util/testingjobs``): API JSON for pods,
PodGroups and nodes, an in-memory fake of the two client APIs the controller calls, informers
over fixed lists, and :class:`Harness`, a :class:`~cogate.controller.reconciler.Reconciler`
wired to them with a scripted ``decide``.

- :func:`raw_pod`, :func:`raw_pg`, :func:`ready_node`: API JSON as a watch delivers it;
- :class:`FakeCluster`: ``CoreV1Api`` + ``CustomObjectsApi`` subset, pods patched with real
  JSON Patch semantics, scripted HTTP errors (:class:`ApiError`), a shared call log;
- :func:`informer`: an :class:`~cogate.controller.kube.informer.Informer` listed once from items;
- :class:`Harness` and :func:`verdict`: a reconciler pass against the fakes.
"""

from __future__ import annotations

import re

from typing import Any

import jsonpatch

from cogate import api
from cogate.controller.model import records
from cogate.controller.model.config import ReconcilerConfig
from cogate.controller.kube.events import EventRecorder
from cogate.controller.kube.informer import Caches, Informer, name_key, namespaced_key, uid_key
from cogate.controller.status.inputs import group_object
from cogate.controller.kube.metrics import Metrics
from cogate.controller.planning.planner import Decision, GroupVerdict
from cogate.controller.reconciler import Reconciler

GATE = api.DEFAULT_GATE_NAME
NS = "team"

class ApiError(Exception):
    def __init__(self, status: int, msg: str = "") -> None:
        super().__init__(f"HTTP {status} {msg}")
        self.status = status


def raw_pod(name: str, *, group: str | None = "pg", gates=(GATE,), node: str = "", phase: str = "Pending",
            cpu: str = "1", created: str = "2024-01-01T00:00:00Z", affinity: dict | None = None,
            owner: bool = False, rv: str = "1") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": "uid-" + name, "creationTimestamp": created,
                            "resourceVersion": rv, "labels": {api.POD_GROUP_LABEL: group} if group else {}}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "j1",
                                    "controller": True}]
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if node:
        spec["nodeName"] = node
    if affinity:
        spec["affinity"] = affinity
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def raw_pg(name: str = "pg", min_member: int = 2, status: dict | None = None, timeout: int | None = None):
    spec: dict[str, Any] = {"minMember": min_member}
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    return {"apiVersion": api.API_VERSION, "kind": api.KIND,
            "metadata": {"name": name, "namespace": NS, "uid": "pg-uid-" + name, "resourceVersion": "1",
                         "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": spec, "status": status or {}}


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


def bound_convert(raw):
    p = records.pod_info(raw)
    if not p.bound or p.terminal:
        raise ValueError("not bound")
    return p


def ready_node(name: str, cpu: str = "64", labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {"zone": "a"}}, "spec": spec,
            "status": {"allocatable": {"cpu": cpu, "pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]}}


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
        caches = Caches(
            podgroups=informer("pg", list(self.cluster.pgs.values()), namespaced_key, group_object),
            members=informer("members", [p for p in pods if p["metadata"]["labels"]], uid_key, records.pod_info),
            bound=informer("bound", [p for p in pods if p["spec"].get("nodeName")], uid_key, records.pod_info),
            nodes=informer("nodes", [ready_node(n) for n in ("n1", "n2", "n3")], name_key, records.node_info),
        )
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
