"""Child process of the controller-memory benchmark: fill the controller's informer caches
through the watch-event path and print the process's RSS at checkpoints (one JSON object).

    python bench/_memory_feed.py --nodes 5000 --pods 100000 --members 10000

The informers are the controller's own (:class:`cogate.controller.kube.informer.Informer`,
keyed and converted exactly as the core feature (``cogate.controller.core``) declares them: nodes by name with
``records.node_info``, bound pods and members by uid with ``records.pod_info``, PodGroups by
namespace/name with ``inputs.group_object``). Each is run with a watch source that
yields ``ADDED`` events decoded from JSON lines, as ``informer.WatchStream`` does, so every
object goes through ``Informer._handle_event`` -> convert -> store. ``--members`` of the
pods carry the pod-group label (groups of 8) and are in both the bound-pods and the
members cache, as in the controller.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

MiB = 2**20


def rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


NODE = json.dumps({
    "apiVersion": "v1", "kind": "Node",
    "metadata": {
        "name": "__NAME__", "uid": "__UID__", "resourceVersion": "__RV__",
        "creationTimestamp": "2026-01-05T10:00:00Z",
        "labels": {"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                   "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": "__NAME__", "kubernetes.io/os": "linux",
                   "kubernetes.io/role": "agent", "node-role.kubernetes.io/agent": "", "type": "kwok",
                   "node.kubernetes.io/instance-type": "m5.8xlarge", "topology.kubernetes.io/region": "eu-west-1",
                   "topology.kubernetes.io/zone": "eu-west-1__ZONE__"},
        "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0",
                        "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
        "managedFields": [{"manager": "kwok", "operation": "Update", "apiVersion": "v1",
                           "time": "2026-01-05T10:00:01Z", "fieldsType": "FieldsV1", "subresource": "status",
                           "fieldsV1": {"f:status": {"f:allocatable": {"f:cpu": {}, "f:memory": {}, "f:pods": {}},
                                                     "f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}}}}}}],
    },
    "spec": {"podCIDR": "10.__ZONE__.0.0/24", "providerID": "kwok://__NAME__",
             "taints": [{"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}]},
    "status": {
        "addresses": [{"type": "InternalIP", "address": "10.0.__ZONE__.1"}, {"type": "Hostname", "address": "__NAME__"}],
        "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "100Gi"},
        "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "100Gi"},
        "conditions": [
            {"type": t, "status": s, "reason": r, "message": m, "lastHeartbeatTime": "2026-01-05T10:00:01Z",
             "lastTransitionTime": "2026-01-05T10:00:01Z"}
            for t, s, r, m in (("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
                               ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                               ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                               ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                               ("NetworkUnavailable", "False", "RouteCreated", "RouteController created a route"))],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10247}},
        "images": [{"names": [f"registry.example.com/team/image-{k}@sha256:{k:064x}",
                              f"registry.example.com/team/image-{k}:v1.{k}"], "sizeBytes": 100_000_000 + k}
                   for k in range(8)],
        "nodeInfo": {"architecture": "amd64", "bootID": "", "containerRuntimeVersion": "kwok-v0.8.0",
                     "kernelVersion": "kwok-v0.8.0", "kubeProxyVersion": "", "kubeletVersion": "kwok-v0.8.0",
                     "machineID": "", "operatingSystem": "linux", "osImage": "", "systemUUID": ""},
        "phase": "Running",
    },
})

POD = json.dumps({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {
        "name": "__NAME__", "namespace": "__NS__", "uid": "__UID__", "resourceVersion": "__RV__",
        "generateName": "web-7d9f8c6b5-", "creationTimestamp": "2026-01-05T10:05:00Z",
        "labels": {"app": "web", "pod-template-hash": "7d9f8c6b5", "tier": "frontend", "__LABEL__": "__GROUP__"},
        "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "9090",
                        "kubectl.kubernetes.io/restartedAt": "2026-01-05T09:00:00Z"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f8c6b5",
                             "uid": "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0", "controller": True,
                             "blockOwnerDeletion": True}],
        "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                           "time": "2026-01-05T10:05:00Z", "fieldsType": "FieldsV1",
                           "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}}}}}],
    },
    "spec": {
        "volumes": [{"name": "config", "configMap": {"name": "web-config", "defaultMode": 420}},
                    {"name": "cache", "emptyDir": {}},
                    {"name": "kube-api-access-abcde", "projected": {"defaultMode": 420, "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}],
        "containers": [
            {"name": "web", "image": "registry.example.com/web/frontend:3.2.1",
             "ports": [{"containerPort": 8080, "protocol": "TCP"}, {"containerPort": 9090, "protocol": "TCP"}],
             "env": [{"name": "LOG_LEVEL", "value": "info"}, {"name": "CACHE_DIR", "value": "/cache"},
                     {"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}}],
             "resources": {"requests": {"cpu": "1500m", "memory": "4Gi"}, "limits": {"memory": "4Gi"}},
             "volumeMounts": [{"name": "config", "mountPath": "/etc/web"}, {"name": "cache", "mountPath": "/cache"},
                              {"name": "kube-api-access-abcde", "readOnly": True,
                               "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
             "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080, "scheme": "HTTP"}, "periodSeconds": 5},
             "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
             "imagePullPolicy": "IfNotPresent"},
            {"name": "proxy", "image": "registry.example.com/mesh/proxy:1.22",
             "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
             "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
             "imagePullPolicy": "IfNotPresent"}],
        "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default", "serviceAccount": "default", "nodeName": "__NODE__",
        "securityContext": {}, "schedulerName": "default-scheduler", "priority": 0,
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                         "tolerationSeconds": 300},
                        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                         "tolerationSeconds": 300},
                        {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
        "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority",
    },
    "status": {
        "phase": "Running", "hostIP": "10.0.0.1", "podIP": "__IP__", "podIPs": [{"ip": "__IP__"}],
        "startTime": "2026-01-05T10:05:01Z", "qosClass": "Burstable",
        "conditions": [{"type": t, "status": "True", "lastProbeTime": None,
                        "lastTransitionTime": "2026-01-05T10:05:02Z"}
                       for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")],
        "containerStatuses": [
            {"name": n, "ready": True, "restartCount": 0, "started": True, "image": img, "imageID": img,
             "containerID": f"kwok://{n}-__UID__", "state": {"running": {"startedAt": "2026-01-05T10:05:02Z"}}}
            for n, img in (("web", "registry.example.com/web/frontend:3.2.1"),
                           ("proxy", "registry.example.com/mesh/proxy:1.22"))],
    },
})

PODGROUP = json.dumps({
    "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
    "metadata": {"name": "__NAME__", "namespace": "__NS__", "uid": "__UID__", "resourceVersion": "__RV__",
                 "creationTimestamp": "2026-01-05T10:04:00Z", "generation": 1},
    "spec": {"minMember": 8, "scheduleTimeoutSeconds": 600},
})

MEMBERS_PER_GROUP = 8


def node_lines(n: int) -> Iterator[str]:
    for i in range(n):
        yield NODE.replace("__NAME__", f"node-{i:05d}").replace("__UID__", f"00000000-0000-4000-8000-{i:012d}") \
            .replace("__RV__", str(1000 + i)).replace("__ZONE__", str(i % 3))


def pod_line(i: int, n_nodes: int, members: int) -> str:
    node = f"node-{i % n_nodes:05d}"
    if i < members:
        ns, name, group, label = "ml", f"train-{i // MEMBERS_PER_GROUP:05d}-{i % MEMBERS_PER_GROUP}", \
            f"train-{i // MEMBERS_PER_GROUP:05d}", "scheduling.x-k8s.io/pod-group"
    else:
        ns, name, group, label = f"team-{i % 50:02d}", f"web-7d9f8c6b5-{i:06d}", "v1", "version"
    return (POD.replace("__NAME__", name).replace("__NS__", ns).replace("__UID__", f"10000000-0000-4000-8000-{i:012d}")
            .replace("__RV__", str(100_000 + i)).replace("__NODE__", node)
            .replace("__IP__", f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}")
            .replace("__LABEL__", label).replace("__GROUP__", group))


def group_lines(n: int) -> Iterator[str]:
    for g in range(n):
        yield PODGROUP.replace("__NAME__", f"train-{g:05d}").replace("__NS__", "ml") \
            .replace("__UID__", f"20000000-0000-4000-8000-{g:012d}").replace("__RV__", str(900_000 + g))


def fed(name: str, key, convert, lines: Iterator[str], checkpoint=None, every: int = 0):
    """An Informer (keyed and converted as the controller's) run over a watch that yields one
    ADDED event per JSON line (decoded as WatchStream does), then stops. The list is empty:
    everything arrives as watch events. ``checkpoint(k)`` is called after every ``every``
    events have been handled."""
    from cogate.controller.kube.informer import Informer

    stop = threading.Event()

    def watch(_rv: str):
        for k, line in enumerate(lines, 1):
            yield json.loads('{"type":"ADDED","object":' + line + "}")
            if every and k % every == 0:  # resumed: event k has been handled
                checkpoint(k)
        stop.set()

    informer = Informer(name, lambda: ([], "1"), watch, key, convert)
    informer.run(stop)
    return informer


def breakdown(records: list, sample: int = 2000) -> tuple[float, dict[str, float]]:
    """Average bytes per record of ``records[:sample]`` (dataclass instances), by field:
    objects reachable from each field, each object counted once over the whole sample (so
    values shared between records, e.g. interned strings, count once); ``(instance)`` is
    the object and its ``__dict__``. Returns (bytes per record, {field: bytes per record})."""
    import dataclasses
    import types

    skip = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType)
    seen: set[int] = set()

    def deep(obj) -> int:
        if id(obj) in seen or isinstance(obj, skip):
            return 0
        seen.add(id(obj))
        size = sys.getsizeof(obj)
        if dataclasses.is_dataclass(obj) and hasattr(obj, "__dict__"):
            seen.add(id(obj.__dict__))
            size += sys.getsizeof(obj.__dict__)
            return size + sum(deep(v) for v in obj.__dict__.values())
        return size + sum(deep(r) for r in gc.get_referents(obj))

    records = records[:sample]
    by_field: dict[str, int] = {"(instance)": 0}
    for r in records:
        seen.add(id(r))
        seen.add(id(r.__dict__))
        by_field["(instance)"] += sys.getsizeof(r) + sys.getsizeof(r.__dict__)
        for f in dataclasses.fields(r):
            by_field[f.name] = by_field.get(f.name, 0) + deep(getattr(r, f.name))
    n = max(1, len(records))
    per = {k: v / n for k, v in by_field.items()}
    return sum(per.values()), per


def shared_copy(records: list) -> list:
    """Copies of pod records whose equal values are shared, as a converter could make them:
    strings interned, equal tuples (tolerations, gates, ...) and equal mappings (labels,
    requests, an empty nodeSelector) replaced by one canonical object. Measures what sharing
    would save; the cached records are not changed."""
    import dataclasses
    from types import MappingProxyType

    canon: dict = {}

    def share(v):
        if isinstance(v, str):
            return sys.intern(v)
        if isinstance(v, tuple):
            v = tuple(share(x) for x in v)
        elif dataclasses.is_dataclass(v):
            v = dataclasses.replace(v, **{f.name: share(getattr(v, f.name)) for f in dataclasses.fields(v)})
        elif isinstance(v, (dict, MappingProxyType)):
            items = tuple(sorted((share(k), share(x)) for k, x in v.items()))
            key = ("map", type(v), items)
            if key not in canon:
                d = dict(items)
                canon[key] = MappingProxyType(d) if isinstance(v, MappingProxyType) else d
            return canon[key]
        else:
            return v
        try:
            return canon.setdefault(v, v)
        except TypeError:  # unhashable
            return v

    return [dataclasses.replace(r, **{f.name: share(getattr(r, f.name)) for f in dataclasses.fields(r)
                                      if f.name not in ("uid", "name", "resource_version")}) for r in records]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, required=True)
    ap.add_argument("--pods", type=int, required=True)
    ap.add_argument("--members", type=int, required=True, help="pods that are PodGroup members (groups of 8)")
    ap.add_argument("--steps", type=int, default=4, help="RSS checkpoints while pods arrive")
    args = ap.parse_args()

    import kubernetes.client  # noqa: F401 - the controller process imports the official client

    from cogate import api
    from cogate.controller import main as controller_main  # noqa: F401 - everything the controller imports
    from cogate.controller.model import records
    from cogate.controller.kube.informer import name_key, namespaced_key, uid_key
    from cogate.controller.planning.planner import GroupRequest, PlannerConfig, decide
    from cogate.controller.status.inputs import group_object

    gc.collect()
    points = [{"step": "modules imported, no objects", "pods": 0, "rss": rss()}]

    def mark(step: str, pods: int) -> None:
        gc.collect()
        points.append({"step": step, "pods": pods, "rss": rss()})

    t0 = time.perf_counter()
    nodes = fed("nodes", name_key, records.node_info, node_lines(args.nodes))
    mark(f"{args.nodes:,} nodes", 0)
    members = fed("members", uid_key, records.pod_info,
                  (pod_line(i, args.nodes, args.members) for i in range(args.members)))
    mark(f"+ {args.members:,} PodGroup members (members cache)", 0)
    every = max(1, args.pods // args.steps)
    bound = fed("bound-pods", uid_key, records.pod_info,
                (pod_line(i, args.nodes, args.members) for i in range(args.pods)),
                lambda k: mark(f"+ {k:,} bound pods", k), every)
    if args.pods % every:
        mark(f"+ {args.pods:,} bound pods", args.pods)
    groups = fed("podgroups", namespaced_key, group_object, group_lines(args.members // MEMBERS_PER_GROUP))
    mark(f"+ {args.members // MEMBERS_PER_GROUP:,} PodGroups", args.pods)
    feed_seconds = time.perf_counter() - t0
    assert len(nodes.store) == args.nodes and len(bound.store) == args.pods, (len(nodes.store), len(bound.store))
    assert len(members.store) == args.members and len(groups.store) == args.members // MEMBERS_PER_GROUP

    # One planning pass over the caches, as the reconciler runs it (snapshot, then decide).
    by_group: dict[tuple[str, str], list] = {}
    for p in members.snapshot():
        by_group.setdefault((p.namespace, p.labels[api.POD_GROUP_LABEL]), []).append(p)
    requests = [GroupRequest(g.pg.metadata.namespace, g.pg.metadata.name, g.pg.spec.minMember, 0.0, True,
                             tuple(by_group.get(key, ()))) for key, g in groups.store.items()]
    decide(nodes.snapshot(), bound.snapshot(), requests, [], time.time(), PlannerConfig())
    del by_group, requests
    gc.collect()
    points.append({"step": "after one planning pass", "pods": args.pods, "rss": rss()})
    sample = [p for p in bound.snapshot() if not p.group]
    per_pod, per_field = breakdown(sample)
    per_node, _ = breakdown(nodes.snapshot(), 500)
    per_pod_shared, _ = breakdown(shared_copy(sample[:2000]))
    print(json.dumps({"points": points, "per_pod_bytes": per_pod, "per_pod_bytes_by_field": per_field,
                      "per_pod_bytes_shared": per_pod_shared,
                      "per_node_bytes": per_node, "peak": peak(), "feed_seconds": feed_seconds,
                      "pod_json_bytes": len(pod_line(args.members, args.nodes, args.members)),
                      "member_json_bytes": len(pod_line(0, args.nodes, args.members)) if args.members else 0,
                      "node_json_bytes": len(next(node_lines(1)))}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
