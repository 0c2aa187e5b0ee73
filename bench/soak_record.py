"""The chaos soak's recorder (issue 35): watches that turn every pod, PodGroup, node and
ProvisioningRequest change into the records the invariants read (:mod:`soak_invariants`).

:func:`pod_state`, :func:`group_state`, :func:`node_state` and :func:`provreq_state` read one API object (JSON dict) into
a record (pure). :class:`Recorder` runs one watch thread per resource straight against
kube-apiserver (not through the soak's faulty proxy: the record must not miss what cogate
misses), lists again after any error (kube-apiserver restarts are among the faults) and then
records as deleted every object the new list no longer has.
"""

from __future__ import annotations

import json
import re
import threading
import time
from datetime import datetime
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client, watch
from kubernetes.utils import parse_quantity

from cogate.api import GROUP, PLURAL, POD_GROUP_LABEL, VERSION

from soak_invariants import GroupState, NodeState, PodState, ProvReqState, Record
from soak_workloads import POOL_KEY, ROLE_LABEL  # the pool's node label / node selector key, the role label

#: cogate's field manager (status.nominatedNodeName it set; controller/preemption/room.py).
MANAGER = "cogate-controller"
ROLE_MINIMUMS, PROVISIONING = "cogate.dev/role-minimums", "cogate.dev/provisioning"
PROVREQ_GROUP = "cogate.dev/podgroup"
#: ProvisioningRequests: (group, version, plural).
PROVREQ_API = ("autoscaling.x-k8s.io", "v1", "provisioningrequests")
_DISRUPTION = re.compile(r"cogate: preempting to place PodGroup ([^/\s]+)/([^/\s]+) \(priority -?\d+\)")


def _millicores(value: Any) -> int:
    try:
        return int(parse_quantity(str(value)) * 1000)
    except (ValueError, TypeError):
        return 0


def pinned_node(spec: Mapping[str, Any]) -> str:
    """The one node a pod's required node affinity names by ``metadata.name`` in every term, else ''."""
    terms = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    nodes = set()
    for term in terms:
        fields = [f for f in term.get("matchFields") or [] if f.get("key") == "metadata.name"]
        if len(fields) != 1 or fields[0].get("operator") != "In" or len(fields[0].get("values") or []) != 1:
            return ""
        nodes.add(fields[0]["values"][0])
    return nodes.pop() if len(nodes) == 1 else ""


def _nominated_by(meta: Mapping[str, Any]) -> str:
    for mf in meta.get("managedFields") or []:
        if "f:nominatedNodeName" in ((mf.get("fieldsV1") or {}).get("f:status") or {}):
            return str(mf.get("manager") or "")
    return ""


def pod_state(obj: Mapping[str, Any], t: float, gate: str, gone: bool = False) -> PodState:
    """The record of pod ``obj`` seen at ``t`` (``gone``: a DELETED event or missing from a new list)."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    cpu = sum(_millicores(((c.get("resources") or {}).get("requests") or {}).get("cpu", 0))
              for c in spec.get("containers") or [])
    disruption = ""
    for c in status.get("conditions") or []:
        if c.get("type") == "DisruptionTarget" and c.get("status") == "True":
            m = _DISRUPTION.fullmatch(str(c.get("message") or ""))
            if m:
                disruption = f"{m.group(1)}/{m.group(2)}"
    nominated = str(status.get("nominatedNodeName") or "")
    return PodState(t, int(meta.get("resourceVersion") or 0), meta.get("namespace", ""), meta.get("name", ""),
                    meta.get("uid", ""), group=(meta.get("labels") or {}).get(POD_GROUP_LABEL, ""),
                    gated=any(g.get("name") == gate for g in spec.get("schedulingGates") or []),
                    node=spec.get("nodeName") or "", pin=pinned_node(spec), phase=status.get("phase") or "Pending",
                    cpu=cpu, nominated=nominated,
                    nominated_by_cogate=bool(nominated) and _nominated_by(meta) == MANAGER,
                    disruption=disruption, gone=gone or bool(meta.get("deletionTimestamp")),
                    role=(meta.get("labels") or {}).get(ROLE_LABEL, ""),
                    pool=(spec.get("nodeSelector") or {}).get(POOL_KEY, ""), priority=int(spec.get("priority") or 0))


def _role_minimums(text: Any) -> tuple[tuple[str, int], ...]:
    """``cogate.dev/role-minimums`` as sorted ``(role, minimum)`` pairs; () when absent or unreadable."""
    try:
        value = json.loads(text) if text else {}
        return tuple(sorted((str(k), int(v)) for k, v in value.items()))
    except (ValueError, TypeError, AttributeError):
        return ()


def group_state(obj: Mapping[str, Any], t: float, gone: bool = False, wall: float | None = None) -> GroupState:
    """The record of PodGroup ``obj`` seen at ``t``; ``wall``: the epoch seconds of ``t``, to place a True
    ``Released``'s lastTransitionTime on the records' clock (``released_t``, 1 s earlier for the
    timestamp's whole seconds)."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    conds = {c.get("type"): c for c in status.get("conditions") or [] if isinstance(c, dict)}
    rel = conds.get("Released") or {}
    released_at = str(rel.get("lastTransitionTime") or "t") if rel.get("status") == "True" else ""
    released_t = None
    if released_at and wall is not None:
        try:
            age = wall - datetime.fromisoformat(released_at.replace("Z", "+00:00")).timestamp()
            released_t = t - max(0.0, age) - 1.0
        except ValueError:
            pass
    return GroupState(t, int(meta.get("resourceVersion") or 0), meta.get("namespace", ""), meta.get("name", ""),
                      meta.get("uid", ""), generation=int(meta.get("generation") or 1),
                      min_member=int(spec.get("minMember") or 1), released_at=released_at, released_t=released_t,
                      preempting=(conds.get("Preempting") or {}).get("status") == "True",
                      scheduled=int(status.get("scheduled") or 0), running=int(status.get("running") or 0),
                      gone=gone or bool(meta.get("deletionTimestamp")),
                      role_minimums=_role_minimums((meta.get("annotations") or {}).get(ROLE_MINIMUMS)),
                      opted_out=(meta.get("annotations") or {}).get(PROVISIONING) == "false")


def node_state(obj: Mapping[str, Any], t: float, gone: bool = False) -> NodeState:
    """The record of node ``obj`` seen at ``t``."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    tainted = any(t.get("effect") in ("NoSchedule", "NoExecute") and t.get("key") != POOL_KEY
                  for t in spec.get("taints") or [])
    return NodeState(t, meta.get("name", ""), cpu=_millicores((status.get("allocatable") or {}).get("cpu", 0)),
                     cordoned=bool(spec.get("unschedulable")), gone=gone,
                     pool=(meta.get("labels") or {}).get(POOL_KEY, ""), blocked=not ready or tainted)


def provreq_state(obj: Mapping[str, Any], t: float, gone: bool = False) -> ProvReqState:
    """The record of ProvisioningRequest ``obj`` seen at ``t``."""
    meta = obj.get("metadata") or {}
    return ProvReqState(t, meta.get("namespace", ""), meta.get("name", ""),
                        group=(meta.get("labels") or {}).get(PROVREQ_GROUP, ""),
                        gone=gone or bool(meta.get("deletionTimestamp")))


class Recorder:
    """Watches pods, PodGroups, nodes and (``provreqs``) ProvisioningRequests of the whole cluster from
    ``api`` (an admin ApiClient), one thread each; ``clock()`` gives each record's time. :attr:`log`
    grows until :meth:`stop`; :meth:`snapshot` copies it."""

    def __init__(self, api: client.ApiClient, gate: str, clock: Callable[[], float], provreqs: bool = True) -> None:
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        self.log: list[Record] = []
        self.relists = 0
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._clock = clock
        self._threads = [
            threading.Thread(target=self._run, args=(core.list_pod_for_all_namespaces, (),
                                                     lambda o, t, g=False: pod_state(o, t, gate, g)),
                             name="soak-watch-pods", daemon=True),
            threading.Thread(target=self._run, args=(custom.list_cluster_custom_object, (GROUP, VERSION, PLURAL),
                                                     lambda o, t, g=False: group_state(o, t, g, time.time())),
                             name="soak-watch-podgroups", daemon=True),
            threading.Thread(target=self._run, args=(core.list_node, (), node_state), name="soak-watch-nodes",
                             daemon=True),
        ]
        if provreqs:
            self._threads.append(threading.Thread(
                target=self._run, args=(custom.list_cluster_custom_object, PROVREQ_API, provreq_state),
                name="soak-watch-provisioningrequests", daemon=True))

    def start(self) -> "Recorder":
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(40)

    def snapshot(self) -> list[Record]:
        with self.lock:
            return list(self.log)

    def _add(self, records: list[Record]) -> None:
        with self.lock:
            self.log.extend(records)

    def _list(self, lister: Callable[..., Any], args: tuple, read: Callable[..., Record],
              known: dict[str, dict]) -> str:
        body = json.loads(lister(*args, _preload_content=False, _request_timeout=30).data)
        t = self._clock()
        items = body.get("items") or []
        now = {o["metadata"]["uid"]: o for o in items}
        gone = [read(o, t, True) for uid, o in known.items() if uid not in now]
        known.clear()
        known.update(now)
        self._add([*gone, *(read(o, t) for o in items)])
        return body["metadata"]["resourceVersion"]

    def _run(self, lister: Callable[..., Any], args: tuple, read: Callable[..., Record]) -> None:
        known: dict[str, dict] = {}
        rv = None
        while not self._stop.is_set():
            try:
                if rv is None:
                    rv = self._list(lister, args, read, known)
                for ev in watch.Watch().stream(lister, *args, resource_version=rv, timeout_seconds=20,
                                               allow_watch_bookmarks=True, _request_timeout=40):
                    obj = ev["raw_object"]
                    if ev["type"] == "ERROR":
                        rv = None
                        break
                    rv = obj["metadata"]["resourceVersion"]
                    if ev["type"] == "BOOKMARK":
                        continue
                    deleted = ev["type"] == "DELETED"
                    if deleted:
                        known.pop(obj["metadata"]["uid"], None)
                    else:
                        known[obj["metadata"]["uid"]] = obj
                    self._add([read(obj, self._clock(), deleted)])
                    if self._stop.is_set():
                        return
            except Exception:  # noqa: BLE001 - kube-apiserver restarted, rv expired: list again
                rv = None
                self.relists += 1
                if self._stop.wait(0.5):
                    return
