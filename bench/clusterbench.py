"""Shared pieces of the cluster benchmarks (issue 10, benchmarks 2, 3, 4, 6b and 7).

Each cluster benchmark starts its own local control plane
(:class:`cogate.localcluster.cluster.LocalCluster`: etcd, kube-apiserver, kube-scheduler,
kube-controller-manager, kwok) unless one is passed in, creates kwok nodes, runs cogate's
webhook and controller as real processes (:class:`cogate.localcluster.stack.CogateStack`)
and times what happens from ONE pod watch (:class:`PodWatch`): every time is read from
``time.monotonic()`` in this process when the watch event arrives, so creation, gate
removal and binding are on the same clock as in ``tests/e2e/test_example.py``.

Pieces:

- :func:`control_plane`: a started LocalCluster (the one given, or a new one stopped at the end);
- :func:`set_nodes`: replace every kwok node by ``count`` nodes of one shape, wait until Ready;
- :func:`cogate_stack`: webhook + controller processes (context manager);
- :class:`PodWatch`: cluster-wide pod watch recording, per pod, when it was first seen
  (created), first seen without scheduling gates (ungated) and first seen with a node
  (bound), its first nominatedNodeName, plus a binding log and event counts per namespace;
- :class:`ObjectWatch`: the same clock for another resource (nodes, a custom resource): when
  each named fact (e.g. "Ready", a condition) first held for each object;
- :func:`pod`, :func:`pod_group`, :func:`replica_set`: manifests (dicts); :func:`priority_class` creates one;
- :func:`parallel`: run calls on a thread pool ("created at once");
- :func:`new_namespace`, :func:`delete_namespace`;
- :func:`percentile`, :func:`ratio`, :func:`result`: figures and the RESULT dict of the
  contract in bench/README.md, "Adding a benchmark" (name, title, what, baseline, tables,
  plots, targets, notes).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import math
import os
import re
import secrets
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from kubernetes import client, config

from cogate.api import API_VERSION, GROUP, KIND, PLURAL, POD_GROUP_LABEL, VERSION
from cogate.localcluster import nodes as fake_nodes

#: Annotation whose values :class:`PodWatch` records (when each value was first seen).
MARK = "bench.cogate/mark"
#: Label carried by every node this module creates (so they can be found and replaced).
NODE_LABEL = ("cogate-bench", "node")


# ------------------------------------------------------------------ API clients

def api_client(cluster: Any, pool: int = 32) -> client.ApiClient:
    """An admin ApiClient for ``cluster`` with a connection pool of ``pool`` (threads share it)."""
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(cluster.kubeconfig), client_configuration=cfg)
    cfg.connection_pool_maxsize = pool
    return client.ApiClient(cfg)


def parallel(fn: Callable[[Any], Any], items: Iterable[Any], workers: int = 16) -> list[Any]:
    """``fn(item)`` for every item on ``workers`` threads; results in order; the first error is raised."""
    items = list(items)
    if not items:
        return []
    with concurrent.futures.ThreadPoolExecutor(min(workers, len(items))) as pool:
        return list(pool.map(fn, items))


# ------------------------------------------------------------------ the control plane

@contextlib.contextmanager
def control_plane(cluster: Any = None, *, kubernetes_version: str | None = None,
                  feature_gates: dict[str, bool] | None = None) -> Iterator[Any]:
    """``cluster`` itself when given (left running), else a new LocalCluster stopped on exit, of
    ``kubernetes_version`` (default: the pinned default release) with ``feature_gates`` set."""
    if cluster is not None:
        yield cluster
        return
    from cogate.localcluster.build import ensure_binaries
    from cogate.localcluster.cluster import LocalCluster

    ensure_binaries(["etcd", "kubernetes", "kwok"], log=sys.stderr, kubernetes_version=kubernetes_version)
    c = LocalCluster(timeout=120, kubernetes_version=kubernetes_version, feature_gates=feature_gates)
    c.start()
    try:
        yield c
    finally:
        c.stop()


def set_nodes(cluster: Any, count: int, *, prefix: str = "bench-", timeout: float = 300.0,
              **shape: Any) -> list[str]:
    """Delete every kwok node, create ``count`` nodes ``<prefix><i>`` of ``shape`` (keywords of
    :func:`cogate.localcluster.nodes.node_manifest`; untainted unless ``kwok_taint=True``), wait
    until all are Ready. Returns their names."""
    shape.setdefault("kwok_taint", False)
    labels = dict(shape.pop("labels", None) or {})
    labels[NODE_LABEL[0]] = NODE_LABEL[1]
    api = api_client(cluster)
    core = client.CoreV1Api(api)
    try:
        old = [n.metadata.name for n in core.list_node(label_selector="type=kwok").items]
        parallel(lambda n: _ignore_404(core.delete_node, n), old)
        _wait(lambda: not core.list_node(label_selector="type=kwok").items, 120, "old kwok nodes deleted")
        names = [f"{prefix}{i}" for i in range(count)]
        bodies = [fake_nodes.node_manifest(n, labels=labels, **shape) for n in names]
        parallel(lambda b: core.create_node(b, _preload_content=False), bodies)
        fake_nodes.wait_nodes_ready(api, names, timeout)
        return names
    finally:
        api.close()


def _ignore_404(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    try:
        return fn(*args, **kw)
    except client.ApiException as exc:
        if exc.status != 404:
            raise
        return None


def _retry_5xx(fn: Callable[..., Any], *args: Any, attempts: int = 4, **kw: Any) -> Any:
    """``fn(*args, **kw)``, again (after 2 s) on a 5xx answer: deleting the thousands of pods of a
    namespace at once can outlast kube-apiserver's request timeout (504) on a loaded machine;
    what it deleted stays deleted."""
    for i in range(attempts):
        try:
            return fn(*args, **kw)
        except client.ApiException as exc:
            if exc.status is None or exc.status < 500 or i == attempts - 1:
                raise
            what = args[0] if fn is _ignore_404 and args else fn
            log(f"{getattr(what, '__name__', what)}: HTTP {exc.status}; again")
            time.sleep(2)
    return None


def _wait(pred: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def wait_for(pred: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    """Poll ``pred()`` until it is truthy (returned) or ``timeout`` seconds pass (TimeoutError naming ``what``)."""
    return _wait(pred, timeout, what, interval)


@contextlib.contextmanager
def cogate_stack(cluster: Any, *controller_args: str) -> Iterator[Any]:
    """cogate's webhook and controller as processes on ``cluster`` (CRD applied, webhook registered)."""
    from cogate.localcluster.stack import CogateStack

    workdir = Path(tempfile.mkdtemp(prefix="cogate-bench-stack-"))
    stack = CogateStack(cluster, workdir, controller_args=tuple(controller_args))
    stack.start()
    try:
        yield stack
    finally:
        t = time.monotonic()
        stack.stop()
        log(f"cogate stopped in {time.monotonic() - t:.1f} s")
        with contextlib.suppress(Exception):
            from cogate.webhook.config import CONFIGURATION_NAME

            # unregistered, so that pods created later on this cluster are not sent to a stopped webhook
            cluster.kubectl("delete", "mutatingwebhookconfiguration", CONFIGURATION_NAME, "--ignore-not-found",
                            check=False)


def new_namespace(api: client.ApiClient, prefix: str) -> str:
    name = f"{prefix}-{secrets.token_hex(3)}"
    client.CoreV1Api(api).create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


def delete_namespace(api: client.ApiClient, namespace: str, timeout: float = 180.0) -> float:
    """Delete ``namespace``'s ReplicaSets and pods (grace 0), wait until no pod is left, then delete the
    namespace without waiting for its finalization; returns seconds taken."""
    core = client.CoreV1Api(api)
    t0 = time.monotonic()
    _retry_5xx(_ignore_404, client.AppsV1Api(api).delete_collection_namespaced_replica_set, namespace,
               propagation_policy="Background", _preload_content=False)

    def delete_pods() -> None:
        _retry_5xx(_ignore_404, core.delete_collection_namespaced_pod, namespace, grace_period_seconds=0,
                   _preload_content=False)

    def empty() -> bool:
        left = json.loads(core.list_namespaced_pod(namespace, limit=1, _preload_content=False).data)
        return not left.get("items")
    delete_pods()
    try:
        _wait(empty, timeout / 2, f"pods of namespace {namespace} deleted", interval=0.3)
    except TimeoutError:  # a collection delete cut short by the server's timeout: ask again once
        delete_pods()
        _wait(empty, timeout / 2, f"pods of namespace {namespace} deleted", interval=0.3)
    _ignore_404(core.delete_namespace, namespace, propagation_policy="Background")
    return time.monotonic() - t0


# ------------------------------------------------------------------ manifests

def pod(name: str, *, group: str | None = None, cpu: str = "100m", memory: str = "64Mi",
        gate: str | None = None, scheduler_name: str | None = None, node_name: str | None = None,
        labels: dict[str, str] | None = None, priority_class: str | None = None) -> dict[str, Any]:
    """A pod of one container requesting (= limited to) ``cpu``/``memory``.

    ``group``: the PodGroup label; ``gate``: a scheduling gate put there by the creator (not the
    webhook); ``scheduler_name``: ``spec.schedulerName``; ``node_name``: created bound (no scheduler);
    ``priority_class``: ``spec.priorityClassName`` (the API server's Priority admission sets
    ``spec.priority`` from it; see :func:`priority_class`).
    """
    lab = {"app": "bench", **(labels or {})}
    if group is not None:
        lab[POD_GROUP_LABEL] = group
    res = {"cpu": cpu, "memory": memory}
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "registry.invalid/bench:1", "resources": {"requests": res, "limits": res}}],
        "terminationGracePeriodSeconds": 0,
    }
    if gate:
        spec["schedulingGates"] = [{"name": gate}]
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    if node_name:
        spec["nodeName"] = node_name
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": lab}, "spec": spec}


def pod_group(name: str, min_member: int, timeout_seconds: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member}
    if timeout_seconds is not None:
        spec["scheduleTimeoutSeconds"] = timeout_seconds
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name}, "spec": spec}


def replica_set(name: str, replicas: int, *, group: str | None, cpu: str = "100m", memory: str = "64Mi",
                scheduler_name: str | None = None, priority_class: str | None = None) -> dict[str, Any]:
    tmpl = pod("x", group=group, cpu=cpu, memory=memory, scheduler_name=scheduler_name, labels={"rs": name},
               priority_class=priority_class)
    tmpl["metadata"].pop("name")
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"rs": name}},
                     "template": {"metadata": tmpl["metadata"], "spec": tmpl["spec"]}}}


def pre_gated(workload: dict[str, Any], gate: str | None) -> dict[str, Any]:
    """``workload`` (a ReplicaSet body) with scheduling gate ``gate`` added to its pod template (a
    pre-gated member: the webhook's match condition skips it; docs/semantics.md, Admission); ``None``:
    unchanged."""
    if gate is not None:
        spec = workload["spec"]["template"]["spec"]
        spec["schedulingGates"] = [*(spec.get("schedulingGates") or []), {"name": gate}]
    return workload


def priority_class(api: client.ApiClient, name: str, value: int) -> None:
    """Create the PriorityClass ``name`` of ``value`` (preemptionPolicy PreemptLowerPriority), unless it
    exists (409 ignored; an existing class keeps its value)."""
    body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, "globalDefault": False, "preemptionPolicy": "PreemptLowerPriority"}
    try:
        client.SchedulingV1Api(api).create_priority_class(body, _preload_content=False)
    except client.ApiException as exc:
        if exc.status != 409:
            raise


def create_pod_group(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> None:
    client.CustomObjectsApi(api).create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body,
                                                                 _preload_content=False)


def create_pod(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> None:
    client.CoreV1Api(api).create_namespaced_pod(namespace, body, _preload_content=False)


def create_replica_set(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> None:
    client.AppsV1Api(api).create_namespaced_replica_set(namespace, body, _preload_content=False)


# ------------------------------------------------------------------ the watch

@dataclass
class PodRecord:
    namespace: str
    name: str
    group: str | None
    created: float
    gated_at_creation: bool
    ungated: float | None = None
    bound: float | None = None
    node: str | None = None
    deleted: float | None = None
    #: the first ``status.nominatedNodeName`` seen (kube-scheduler's after preemption, or cogate's on a gated member)
    nominated: str | None = None


class _WatchLoop:
    """The watch loop :class:`PodWatch` and :class:`PodGroupWatch` share: watch on from the last
    resourceVersion (reconnecting after an error), relist on an ``ERROR`` event (410 Gone),
    take a ``BOOKMARK``'s resourceVersion only. Subclasses set ``_stop``, ``_resp``, ``_rv`` and
    ``errors`` and give ``_open(rv)`` (the unread watch response), ``_relist()`` and
    ``_event(type, obj, t)`` (``t``: ``time.monotonic()`` at arrival)."""

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._resp = self._open(self._rv)
                for line in self._resp:
                    if self._stop.is_set():
                        return
                    if not line.strip():
                        continue
                    t = time.monotonic()
                    ev = json.loads(line)
                    obj = ev.get("object") or {}
                    if ev.get("type") == "ERROR":
                        self.errors.append(str(obj.get("message")))
                        self._relist()
                        break
                    rv = (obj.get("metadata") or {}).get("resourceVersion")
                    if rv:
                        self._rv = rv
                    if ev.get("type") != "BOOKMARK":
                        self._event(ev["type"], obj, t)
            except Exception as exc:  # noqa: BLE001 - reconnect; the cluster may go away at the end
                if self._stop.is_set():
                    return
                self.errors.append(repr(exc))
                time.sleep(0.2)


@dataclass
class PodWatch(_WatchLoop):
    """Cluster-wide pod watch in a thread; see the module doc. Use as a context manager.

    ``records``: (namespace, name) -> :class:`PodRecord`; ``events``: namespace -> event count;
    ``bind_log``: [(t, namespace, name, group)] in order of observation. Times are
    ``time.monotonic()`` at arrival. Raw JSON lines are parsed directly (no client models).
    """

    api: client.ApiClient
    records: dict[tuple[str, str], PodRecord] = field(default_factory=dict)
    events: dict[str, int] = field(default_factory=dict)
    event_times: list[tuple[float, str]] = field(default_factory=list)
    bind_log: list[tuple[float, str, str, str | None]] = field(default_factory=list)
    #: value of annotation :data:`MARK` -> when first seen (round-trip probes)
    marks: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self._stop = threading.Event()
        self._resp: Any = None
        self._thread = threading.Thread(target=self._run, name="pod-watch", daemon=True)

    def __enter__(self) -> "PodWatch":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._list("ADDED")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        # Wake the reading thread by shutting the socket down (closing the response would block
        # on the lock the reader holds); the thread is a daemon in any case.
        with contextlib.suppress(Exception):
            self._resp.connection.sock.shutdown(socket.SHUT_RDWR)
        t = time.monotonic()
        self._thread.join(5)
        log(f"pod watch stopped in {time.monotonic() - t:.1f} s")

    def _open(self, rv: str) -> Any:
        return client.CoreV1Api(self.api).list_pod_for_all_namespaces(
            watch=True, resource_version=rv, allow_watch_bookmarks=True, timeout_seconds=300,
            _preload_content=False, _request_timeout=(10, 600))

    def _relist(self) -> None:
        self._list("MODIFIED")

    def _event(self, kind: str, obj: dict[str, Any], t: float) -> None:
        self._observe(kind, obj, t)

    def _list(self, kind: str) -> None:
        """List every pod, observe each as ``kind``, and watch on from the list's resourceVersion."""
        core = client.CoreV1Api(self.api)
        raw = json.loads(core.list_pod_for_all_namespaces(_preload_content=False).data)
        self._rv = raw["metadata"]["resourceVersion"]
        now = time.monotonic()
        for obj in raw.get("items") or []:
            self._observe(kind, obj, now)

    def _observe(self, kind: str, obj: dict[str, Any], t: float) -> None:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        mark = (meta.get("annotations") or {}).get(MARK)
        with self.lock:
            if mark is not None and mark not in self.marks:
                self.marks[mark] = t
            self.events[key[0]] = self.events.get(key[0], 0) + 1
            self.event_times.append((t, key[0]))
            rec = self.records.get(key)
            if rec is None or (rec.deleted is not None and kind == "ADDED"):
                rec = PodRecord(key[0], key[1], (meta.get("labels") or {}).get(POD_GROUP_LABEL), t,
                                bool(spec.get("schedulingGates")))
                self.records[key] = rec
            if rec.ungated is None and not spec.get("schedulingGates"):
                rec.ungated = t
            if rec.nominated is None and (obj.get("status") or {}).get("nominatedNodeName"):
                rec.nominated = obj["status"]["nominatedNodeName"]
            if rec.bound is None and spec.get("nodeName"):
                rec.bound = t
                rec.node = spec["nodeName"]
                self.bind_log.append((t, key[0], key[1], rec.group))
            if kind == "DELETED":
                rec.deleted = t
            self.changed.notify_all()

    # -- queries -------------------------------------------------------------
    def pods(self, namespace: str) -> list[PodRecord]:
        with self.lock:
            return [r for (ns, _), r in self.records.items() if ns == namespace and r.deleted is None]

    def wait(self, pred: Callable[[], Any], timeout: float, what: str) -> Any:
        """Wait until ``pred()`` (called under no lock) is truthy; TimeoutError naming ``what``."""
        deadline = time.monotonic() + timeout
        while True:
            got = pred()
            if got:
                return got
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
            with self.changed:
                self.changed.wait(min(left, 0.2))

    def wait_bound(self, namespace: str, count: int, timeout: float) -> float:
        """Wait until ``count`` pods of ``namespace`` are bound; returns the time the last one was seen bound."""
        def done():
            ps = [p for p in self.pods(namespace) if p.bound is not None]
            return len(ps) >= count and max(p.bound for p in ps)
        return self.wait(done, timeout, f"{count} pods bound in {namespace}")

    def wait_ungated(self, namespace: str, count: int, timeout: float) -> float:
        def done():
            ps = [p for p in self.pods(namespace) if p.ungated is not None]
            return len(ps) >= count and max(p.ungated for p in ps)
        return self.wait(done, timeout, f"{count} pods ungated in {namespace}")

    def event_rate(self, namespace: str, start: float, end: float) -> float:
        """Pod events per second of ``namespace`` seen between ``start`` and ``end``."""
        with self.lock:
            n = sum(1 for t, ns in self.event_times if ns == namespace and start <= t <= end)
        return n / (end - start) if end > start else 0.0


@dataclass
class PodGroupWatch(_WatchLoop):
    """Cluster-wide PodGroup watch in a thread: ``decided[(namespace, name)]`` is when the watch first
    saw the group's ``status.scheduleStartTime`` (the controller's release decision recorded in
    status). Times are ``time.monotonic()`` at arrival, the clock of :class:`PodWatch`. Use as a
    context manager."""

    api: client.ApiClient
    decided: dict[tuple[str, str], float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._resp: Any = None
        self._rv = ""
        self._thread = threading.Thread(target=self._run, name="podgroup-watch", daemon=True)

    def __enter__(self) -> "PodGroupWatch":
        self._list()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        with contextlib.suppress(Exception):
            self._resp.connection.sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(5)

    def _list(self) -> None:
        custom = client.CustomObjectsApi(self.api)
        raw = json.loads(custom.list_cluster_custom_object(GROUP, VERSION, PLURAL, _preload_content=False).data)
        self._rv = raw["metadata"]["resourceVersion"]
        now = time.monotonic()
        for obj in raw.get("items") or []:
            self._observe(obj, now)

    def _open(self, rv: str) -> Any:
        return client.CustomObjectsApi(self.api).list_cluster_custom_object(
            GROUP, VERSION, PLURAL, watch=True, resource_version=rv, allow_watch_bookmarks=True,
            timeout_seconds=300, _preload_content=False, _request_timeout=(10, 600))

    def _relist(self) -> None:
        self._list()

    def _event(self, kind: str, obj: dict[str, Any], t: float) -> None:
        if kind in ("ADDED", "MODIFIED"):
            self._observe(obj, t)

    def _observe(self, obj: dict[str, Any], t: float) -> None:
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        if (obj.get("status") or {}).get("scheduleStartTime"):
            with self.lock:
                self.decided.setdefault(key, t)

    def decided_at(self, namespace: str, names: Iterable[str]) -> list[float]:
        """When each named group of ``namespace`` was first seen decided (groups not seen left out)."""
        with self.lock:
            return [self.decided[(namespace, n)] for n in names if (namespace, n) in self.decided]


@dataclass
class ObjectWatch(_WatchLoop):
    """Cluster-wide watch of one resource in a thread, for timelines: ``first[(namespace, name)]``
    maps ``"seen"`` and each fact ``facts(obj)`` ever returned for that object to when the watch first saw it
    (``time.monotonic()`` at arrival, the clock of :class:`PodWatch`); ``last[key]`` is the last
    object seen (also after its deletion), ``deleted[key]`` when it was seen deleted.

    ``resource``: ``"nodes"`` or ``"<group>/<version>/<plural>"`` (a custom resource, e.g.
    ``"autoscaling.x-k8s.io/v1/provisioningrequests"``). ``facts``: obj (a dict) -> names of what
    holds for it now (e.g. ``["seen", "Ready"]``). Use as a context manager."""

    api: client.ApiClient
    resource: str
    facts: Callable[[dict[str, Any]], Iterable[str]]
    first: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    last: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    deleted: dict[tuple[str, str], float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._resp: Any = None
        self._rv = ""
        self._thread = threading.Thread(target=self._run, name=f"watch-{self.resource}", daemon=True)

    def __enter__(self) -> "ObjectWatch":
        self._list()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        with contextlib.suppress(Exception):
            self._resp.connection.sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(5)

    def _call(self, **kw: Any) -> Any:
        if self.resource == "nodes":
            return client.CoreV1Api(self.api).list_node(_preload_content=False, **kw)
        group, version, plural = self.resource.split("/")
        return client.CustomObjectsApi(self.api).list_cluster_custom_object(group, version, plural,
                                                                            _preload_content=False, **kw)

    def _list(self) -> None:
        raw = json.loads(self._call().data)
        self._rv = raw["metadata"]["resourceVersion"]
        now = time.monotonic()
        for obj in raw.get("items") or []:
            self._event("ADDED", obj, now)

    def _open(self, rv: str) -> Any:
        return self._call(watch=True, resource_version=rv, allow_watch_bookmarks=True, timeout_seconds=300,
                          _request_timeout=(10, 600))

    def _relist(self) -> None:
        self._list()

    def _event(self, kind: str, obj: dict[str, Any], t: float) -> None:
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        with self.lock:
            seen = self.first.setdefault(key, {})
            seen.setdefault("seen", t)
            for fact in self.facts(obj):
                seen.setdefault(fact, t)
            self.last[key] = obj
            if kind == "DELETED":
                self.deleted.setdefault(key, t)

    def since(self, t0: float, namespace: str | None = None) -> dict[tuple[str, str], dict[str, float]]:
        """``first`` of the objects first seen at or after ``t0`` (of ``namespace`` when given), copied."""
        with self.lock:
            return {k: dict(v) for k, v in self.first.items()
                    if v.get("seen", -1.0) >= t0 and (namespace is None or k[0] == namespace)}


class MetricClock:
    """Polls the controller's ``/metrics`` every ``interval`` seconds in a thread and keeps
    ``(time.monotonic(), value)`` samples of each counter in ``series`` (key -> (metric, label
    text), as :func:`metric_value` reads them): :meth:`first_at` says when a counter first reached a
    value, to within one interval (e.g. when the controller's members informer had received every
    member: ``cogate_controller_informer_events_total{informer="members",type="ADDED"}``).
    Rendering /metrics costs the controller CPU (a poll every 0.1 s took about a quarter of its
    samples in a profile): :meth:`stop_when` ends the polling once a counter reached a value."""

    def __init__(self, stack: Any, series: dict[str, tuple[str, str | None]], interval: float = 0.1) -> None:
        self.stack = stack
        self.series = series
        self.interval = interval
        self.samples: dict[str, list[tuple[float, float]]] = {k: [] for k in series}
        self.until: dict[str, float] = {}
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metric-clock", daemon=True)

    def __enter__(self) -> "MetricClock":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            with contextlib.suppress(Exception):
                text = self.stack.metrics()
                t = time.monotonic()
                with self.lock:
                    for k, (name, labels) in self.series.items():
                        self.samples[k].append((t, metric_value(text, name, labels)))
                    if self.until and all(self.samples[k] and self.samples[k][-1][1] >= v
                                          for k, v in self.until.items()):
                        return
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - t0)))

    def stop_when(self, key: str, value: float) -> None:
        """Stop polling once counter ``key`` (and every other one given so) reached ``value``."""
        with self.lock:
            self.until[key] = value

    def value(self, key: str) -> float:
        """The last value polled (0 before the first poll)."""
        with self.lock:
            s = self.samples[key]
            return s[-1][1] if s else 0.0

    def first_at(self, key: str, value: float) -> float | None:
        """The first poll at which counter ``key`` was at least ``value`` (None if not yet)."""
        with self.lock:
            return next((t for t, v in self.samples[key] if v >= value), None)


# ------------------------------------------------------------------ controller process

def controller_pid(stack: Any) -> int:
    return stack.processes["controller"].popen.pid


def metric_value(text: str, name: str, labels: str | None = None) -> float:
    """Sum of Prometheus samples ``name`` (optionally whose label set contains ``labels``) in ``text``."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        metric = head.split("{", 1)[0]
        if metric != name or (labels and labels not in head):
            continue
        with contextlib.suppress(ValueError):
            total += float(value)
    return total


STATS = {
    "passes": ("cogate_controller_decisions_total", None),
    "planner s": ("cogate_controller_decision_duration_seconds_sum", None),
    "pass s": ("cogate_controller_reconcile_duration_seconds_sum", None),
    "gates removed": ("cogate_controller_gate_removals_total", 'result="removed"'),
    "status writes": ("cogate_controller_status_writes_total", None),
    "watch events": ("cogate_controller_informer_events_total", None),
    # cogate's own requests while members arrive (issue 40): owner GETs and Events by reason
    "owner reads": ("cogate_controller_owner_reads_total", None),
    "events": ("cogate_controller_events_total", None),
    "events WaitingForMembers": ("cogate_controller_events_total", 'reason="WaitingForMembers"'),
    "events Released": ("cogate_controller_events_total", 'reason="Released"'),
    "events InsufficientCapacity": ("cogate_controller_events_total", 'reason="InsufficientCapacity"'),
    # the path from a group's last member to its release inside the controller (issue 40): sums and count
    "arrivals released": ("cogate_controller_arrival_to_release_seconds_count", 'step="released"'),
    "arrival -> pass started s": ("cogate_controller_arrival_to_release_seconds_sum", 'step="pass_started"'),
    "arrival -> planned s": ("cogate_controller_arrival_to_release_seconds_sum", 'step="planned"'),
    "arrival -> released s": ("cogate_controller_arrival_to_release_seconds_sum", 'step="released"'),
}


def controller_stats(stack: Any) -> dict[str, float]:
    """Counters of the controller's /metrics (passes, seconds in planner.decide and in whole passes,
    gates removed, status writes, watch events); subtract two snapshots for one run."""
    text = stack.metrics()
    return {k: metric_value(text, name, labels) for k, (name, labels) in STATS.items()}


def stats_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: round(after[k] - before.get(k, 0.0), 3) for k in after}


# ------------------------------------------------------------------ where the machine's time goes

def cpu_seconds(cluster: Any, stack: Any = None) -> dict[str, float]:
    """CPU time (user + system, seconds) so far of each control-plane process of ``cluster`` and each
    of cogate's processes in ``stack`` (``/proc/<pid>/stat`` fields 14 and 15); subtract two
    snapshots (:func:`stats_delta`) for one run. Processes that are gone are left out."""
    tick = os.sysconf("SC_CLK_TCK")
    pids = dict(cluster.pids) if hasattr(cluster, "pids") else {}
    if stack is not None:
        pids.update({f"cogate-{n}": p.pid for n, p in stack.processes.items()})
    out = {}
    for name, pid in pids.items():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        out[name] = (int(fields[11]) + int(fields[12])) / tick
    return out


def apiserver_requests(api: client.ApiClient) -> dict[str, float]:
    """Requests the API server has answered so far, from its ``apiserver_request_total`` metric,
    summed as ``"<VERB> <resource>[/<subresource>][ dry-run]"`` (``"PATCH pods"``, ``"POST pods/binding"``,
    ``"PATCH pods dry-run"``, ``"PATCH podgroups/status"``); subtract two snapshots for one run."""
    out: dict[str, float] = {}
    for _, key, value in _apiserver_samples(api, ("apiserver_request_total",), dry_run=True):
        out[key] = out.get(key, 0.0) + value
    return out


def _apiserver_samples(api: client.ApiClient, names: tuple[str, ...], *,
                       dry_run: bool = False) -> list[tuple[str, str, float]]:
    """``(metric, "<VERB> <resource>[/<subresource>][ dry-run]", value)`` for each sample of the
    metrics ``names`` on kube-apiserver's ``/metrics`` (`` dry-run`` only with ``dry_run``)."""
    method, url, headers, body, post = api.param_serialize("GET", "/metrics", auth_settings=["BearerToken"])
    resp = api.call_api(method, url, headers, body, post, _request_timeout=30)
    resp.read()
    out = []
    for line in resp.data.decode().splitlines():
        name = line.partition("{")[0]
        if name not in names or "{" not in line:
            continue
        head, _, value = line.rpartition(" ")
        labels = dict(re.findall(r'(\w+)="([^"]*)"', head))
        key = f"{labels.get('verb', '?')} {labels.get('resource', '?')}"
        if labels.get("subresource"):
            key += "/" + labels["subresource"]
        if dry_run and labels.get("dry_run"):
            key += " dry-run"
        with contextlib.suppress(ValueError):
            out.append((name, key, float(value)))
    return out


def apiserver_latency(api: client.ApiClient) -> dict[str, tuple[float, float]]:
    """``{"<VERB> <resource>[/<subresource>]": (requests, seconds)}`` so far, from kube-apiserver's
    ``apiserver_request_duration_seconds`` (count and sum; every request's time in the server,
    admission and etcd included); subtract two snapshots (:func:`latency_delta`) for one run."""
    count = "apiserver_request_duration_seconds_count"
    out: dict[str, list[float]] = {}
    for name, key, value in _apiserver_samples(api, (count, "apiserver_request_duration_seconds_sum")):
        acc = out.setdefault(key, [0.0, 0.0])
        acc[0 if name == count else 1] += value
    return {k: (v[0], v[1]) for k, v in out.items()}


def latency_delta(before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]],
                  keys: Iterable[str] = ()) -> dict[str, tuple[int, float]]:
    """``{key: (requests, mean ms)}`` between two :func:`apiserver_latency` snapshots (only ``keys``
    when given; keys without requests left out)."""
    out = {}
    for k in keys or after:
        n = after.get(k, (0.0, 0.0))[0] - before.get(k, (0.0, 0.0))[0]
        t = after.get(k, (0.0, 0.0))[1] - before.get(k, (0.0, 0.0))[1]
        if n > 0:
            out[k] = (int(n), round(t / n * 1000, 1))
    return out


WRITE_VERBS = ("POST", "PATCH", "PUT", "DELETE", "APPLY")


def pod_writes(requests: dict[str, float]) -> dict[str, float]:
    """From a delta of :func:`apiserver_requests`: the writes that touch pods (create, binding,
    status, gate removal, dry runs) and PodGroups, by key, zero counts left out."""
    return {k: v for k, v in sorted(requests.items())
            if v and k.split(" ")[0] in WRITE_VERBS and k.split(" ")[1].split("/")[0] in ("pods", "podgroups")}


def run_workloads(api: client.ApiClient, name: str, system: str, workloads: Iterable[Any],
                  run: Callable[["PodWatch", Any], dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{workload.label: run(watch, workload)}`` for each workload in turn under one :class:`PodWatch`
    (the clock of a side-by-side benchmark), each logged as ``<name>: <system>: <label>``."""
    out: dict[str, dict[str, Any]] = {}
    with PodWatch(api) as watch:
        for w in workloads:
            log(f"{name}: {system}: {w.label}")
            out[w.label] = run(watch, w)
            log(f"{name}: {system}: {w.label}: {out[w.label]}")
    return out


# ------------------------------------------------------------------ figures

def percentile(values: Iterable[float], p: float) -> float:
    """Nearest-rank percentile ``p`` (0-100) of ``values``; NaN when empty."""
    xs = sorted(values)
    if not xs:
        return math.nan
    k = max(0, min(len(xs) - 1, math.ceil(p / 100 * len(xs)) - 1))
    return xs[k]


def ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b and not math.isnan(a) and not math.isnan(b) else None


def ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def result(name: str, title: str, what: str, baseline: str, *, tables: list[dict[str, Any]] | None = None,
           plots: list[dict[str, str]] | None = None, targets: list[dict[str, Any]] | None = None,
           notes: list[str] | None = None) -> dict[str, Any]:
    """The RESULT dict of the benchmark contract."""
    return {"name": name, "title": title, "what": what, "baseline": baseline, "tables": tables or [],
            "plots": plots or [], "targets": targets or [], "notes": notes or []}


def table(caption: str, columns: list[str], rows: list[list[Any]]) -> dict[str, Any]:
    return {"caption": caption, "columns": columns, "rows": rows}


def target(what: str, target_: str, measured: str, met: bool | None, explanation: str = "") -> dict[str, Any]:
    """One row of the report's targets: ``met`` True/False against ``target_``; None when there is
    no target and the figure is only reported (the report then says "reported", never "met")."""
    return {"what": what, "target": target_, "measured": measured, "met": None if met is None else bool(met),
            "explanation": "" if met or met is None else explanation}


def main(run: Callable[[bool, Path], dict[str, Any]], argv: list[str] | None = None) -> None:
    """Command line of a benchmark module: ``[--quick] [--out-dir DIR]``; prints ``RESULT <json>``."""
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="tiny sizes: smoke-test the harness")
    ap.add_argument("--out-dir", type=Path, default=None, help="where plots go (default: a temp dir)")
    args, extra = ap.parse_known_args(argv)
    out = args.out_dir or Path(tempfile.mkdtemp(prefix="cogate-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    res = run(args.quick, out, *extra) if extra else run(args.quick, out)
    print("RESULT " + json.dumps(res))


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


os.environ.setdefault("PYTHONUNBUFFERED", "1")
