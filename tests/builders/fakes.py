"""In-memory fakes of the client APIs the controller calls, and informers over them."""

from __future__ import annotations

import copy

import jsonpatch

from cogate import api
from cogate.controller.kube.informer import Caches, Informer, name_key, namespaced_key, uid_key
from cogate.controller.model import records
from cogate.controller.status.inputs import group_object


class ApiError(Exception):
    def __init__(self, status: int, msg: str = "") -> None:
        super().__init__(f"HTTP {status} {msg}")
        self.status = status


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
    def patch_namespaced_custom_object(self, group, version, namespace, plural, name, body, **kw):
        """A merge patch of the PodGroup's ``metadata.annotations`` (``None`` removes one)."""
        assert (group, version, plural) == (api.GROUP, api.VERSION, api.PLURAL)
        assert kw["_content_type"] == "application/merge-patch+json"
        assert set(body) == {"metadata"} and set(body["metadata"]) == {"annotations"}
        pg = self.pgs[name]
        annotations = dict(pg["metadata"].get("annotations") or {})
        for k, v in body["metadata"]["annotations"].items():
            if v is None:
                annotations.pop(k, None)
            else:
                annotations[k] = v
        pg["metadata"]["annotations"] = annotations
        self._bump(pg)
        self.log.append(("annotate", name))
        return jsonpatch.apply_patch(pg, [])

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
