"""All-or-nothing judged from gates and bindings themselves, ordered by the API server.

:class:`GangWatch` watches the pods and the PodGroups of one namespace and records every state
it sees with the object's ``resourceVersion``. On one kube-apiserver over one etcd these are
etcd revisions, one counter for every object, so they order a pod's binding against another
pod's gate removal and against the PodGroup's status write exactly, whatever the delays of the
watch streams (Kubernetes calls resourceVersions opaque; this test-only use relies on the local
control plane's single etcd). :func:`release_faults` (pure) then says whether a group was released
as one:

- no member is bound before the PodGroup recorded the release (its ``Released`` condition True);
- every member the release covers has its gate removed, and none of them is bound while another
  still holds the gate unless the one bound was pinned by the release (its required node affinity
  names exactly one node) and is bound on that node: a member kube-scheduler may place anywhere
  must not run while a sibling waits;
- every pinned member is bound on the node its pin names.

Why not "none bound while a sibling is still gated" outright: gates are removed one pod at a time
(Kubernetes has no transaction over several objects) and kube-scheduler takes each member as soon
as its gate goes; the watch sees it bind a member one revision after that member's gate removal,
before the next member's. What keeps that from being a half-placed gang is the pin: the planned
node was checked for the whole gang before any gate went. (This replaces "every ``PodScheduled``
turned True within a few seconds", which passed a split release faster than the window and failed
a correct one slower than it.)
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kubernetes import client, watch

from cogate.api import DEFAULT_GATE_NAME, GROUP, PLURAL, POD_GROUP_LABEL, VERSION


@dataclass(frozen=True)
class Seen:
    """One state of one object: ``rv`` (its resourceVersion as an int), ``kind`` (``"Pod"`` or
    ``"PodGroup"``), ``name``, ``group`` (a pod's PodGroup label; a PodGroup's own name), and
    ``gated`` / ``bound`` (the node, ``""`` when unbound) / ``pin`` (the one node its required node
    affinity allows by ``metadata.name``, ``""`` when none) for a pod, ``released`` for a PodGroup."""

    rv: int
    kind: str
    name: str
    group: str
    gated: bool = False
    bound: str = ""
    released: bool = False
    pin: str = ""


def pinned_node(spec: dict) -> str:
    """The node a pod's required node affinity pins it to: the single value of a ``matchFields``
    ``metadata.name In [node]`` requirement when every term has exactly that one; else ``""``."""
    terms = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    nodes = set()
    for term in terms:
        fields = [f for f in term.get("matchFields") or [] if f.get("key") == "metadata.name"]
        if len(fields) != 1 or fields[0].get("operator") != "In" or len(fields[0].get("values") or []) != 1:
            return ""
        nodes.add(fields[0]["values"][0])
    return nodes.pop() if len(nodes) == 1 else ""


def seen_pod(pod: dict, gate: str = DEFAULT_GATE_NAME) -> Seen:
    spec = pod.get("spec") or {}
    meta = pod["metadata"]
    return Seen(int(meta["resourceVersion"]), "Pod", meta["name"], (meta.get("labels") or {}).get(POD_GROUP_LABEL, ""),
                gated=any(g.get("name") == gate for g in spec.get("schedulingGates") or []),
                bound=spec.get("nodeName") or "", pin=pinned_node(spec))


def seen_pod_group(pg: dict) -> Seen:
    conds = (pg.get("status") or {}).get("conditions") or []
    released = any(c.get("type") == "Released" and c.get("status") == "True" for c in conds)
    meta = pg["metadata"]
    return Seen(int(meta["resourceVersion"]), "PodGroup", meta["name"], meta["name"], released=released)


def release_faults(log: Iterable[Seen], group: str, members: Iterable[str] | None = None) -> list[str]:
    """What in ``log`` shows that ``group`` was not released as one (see the module doc); ``[]``
    when it was, or when none of its members was bound. Members are the pods labelled for
    ``group``; the release covers ``members`` when given (e.g. every pod of a gang that must start
    whole), else those whose gate went before the first binding (:func:`covered_members`)."""
    states = sorted((s for s in log if s.group == group), key=lambda s: s.rv)
    released_at = next((s.rv for s in states if s.kind == "PodGroup" and s.released), None)
    first_bound: dict[str, int] = {}
    ungated_at: dict[str, int] = {}
    nodes: dict[str, str] = {}
    pins: dict[str, str] = {}
    for s in states:
        if s.kind != "Pod":
            continue
        if s.bound and s.name not in first_bound:
            first_bound[s.name], nodes[s.name], pins[s.name] = s.rv, s.bound, s.pin
        if not s.gated:
            ungated_at.setdefault(s.name, s.rv)
    if not first_bound:
        return []
    faults = []
    first = min(first_bound.values())
    if released_at is None:
        faults.append(f"members were bound ({', '.join(sorted(first_bound))}) but the PodGroup never recorded a release")
    elif first < released_at:
        early = sorted(n for n, rv in first_bound.items() if rv < released_at)
        faults.append(f"bound before the PodGroup recorded the release: {', '.join(early)}")
    covered = set(members) if members is not None else {n for n, rv in ungated_at.items() if rv < first}
    never = float("inf")  # a covered member whose gate never went is still gated at every binding
    for name in sorted(covered - set(ungated_at)):
        faults.append(f"{name} was covered by the release but its gate was never removed")
    for name, rv in sorted(first_bound.items(), key=lambda kv: kv[1]):
        late = sorted(m for m in covered if m != name and ungated_at.get(m, never) > rv)
        if late and not pins.get(name):
            faults.append(f"{name} was bound without a pin while {', '.join(late)} of the same release still "
                          "held the gate")
        if pins.get(name) and nodes[name] != pins[name]:
            faults.append(f"{name} was pinned to {pins[name]} but bound on {nodes[name]}")
    return faults


def covered_members(log: Iterable[Seen], group: str) -> set[str]:
    """Members of ``group`` whose gate went before any member was bound (the release)."""
    states = sorted((s for s in log if s.group == group and s.kind == "Pod"), key=lambda s: s.rv)
    first = next((s.rv for s in states if s.bound), None)
    return {s.name for s in states if not s.gated and (first is None or s.rv < first)}


class GangWatch:
    """Watch the pods and PodGroups of ``namespace`` from now on (two threads), recording
    :class:`Seen` states; :meth:`faults` judges a group with :func:`release_faults`."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.api, self.namespace = api, namespace
        self.log: list[Seen] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        self._threads = [
            threading.Thread(target=self._run, args=(core.list_namespaced_pod, (namespace,), seen_pod), daemon=True),
            threading.Thread(target=self._run, args=(custom.list_namespaced_custom_object,
                                                     (GROUP, VERSION, namespace, PLURAL), seen_pod_group), daemon=True),
        ]

    def start(self) -> "GangWatch":
        self._started = [threading.Event() for _ in self._threads]
        for t, ev in zip(self._threads, self._started):
            t.ready = ev  # type: ignore[attr-defined]
            t.start()
        for ev in self._started:
            ev.wait(10)
        return self

    def _run(self, lister, args: Sequence, read) -> None:
        body = json.loads(lister(*args, _preload_content=False).data)
        with self._lock:
            self.log.extend(read(o) for o in body.get("items") or [])
        rv = body["metadata"]["resourceVersion"]
        threading.current_thread().ready.set()  # type: ignore[attr-defined]
        while not self._stop.is_set():
            try:
                for ev in watch.Watch().stream(lister, *args, resource_version=rv, timeout_seconds=2):
                    obj = ev["raw_object"]
                    if ev["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        with self._lock:
                            self.log.append(read(obj))
                    rv = obj["metadata"]["resourceVersion"]
                    if self._stop.is_set():
                        return
            except Exception:  # noqa: BLE001 - an expired resourceVersion or teardown: list again
                if self._stop.wait(0.2):
                    return
                body = json.loads(lister(*args, _preload_content=False).data)
                rv = body["metadata"]["resourceVersion"]

    def faults(self, group: str, members: Iterable[str] | None = None) -> list[str]:
        with self._lock:
            return release_faults(list(self.log), group, members)

    def covered(self, group: str) -> set[str]:
        with self._lock:
            return covered_members(list(self.log), group)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(5)
