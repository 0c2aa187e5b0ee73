"""The chaos soak's workloads (issue 35): a seeded stream of every kind cogate serves.

:class:`Workloads` creates, every ``step`` seconds, one workload while fewer than ``cap`` live
(choice by a ``random.Random`` seeded by the soak), deletes those past their lifetime, and now and
then deletes one member of a running gang (its owner recreates it gated: "members deleted and
recreated"). Kinds (:data:`KINDS`, with their weights):

- ``replicaset``: a ReplicaSet of 2-4 with a PodGroup of minMember = replicas, 0.5-2 CPU each;
- ``job`` / ``indexed-job``: a Job (NonIndexed / Indexed) of parallelism = completions = 2-4 whose
  pods kwok completes after 20-60 s (``pod-complete.stage.kwok.x-k8s.io/delay``);
- ``statefulset``: a StatefulSet of 2-3 (``podManagementPolicy: Parallel``: OrderedReady never
  creates the second pod of a gated first one);
- ``high-priority``: a ReplicaSet gang of 3-4 x 3-4 CPU at priority ``soak-high`` (1000), which
  preempts ``soak-low`` fillers and ``soak-mid`` gangs when the cluster is full;
- ``never-fits``: a gang of 2 x 64 CPU (no node has that many): it must wait, never start;
- ``filler``: 6-12 single-CPU pods of a ReplicaSet without a PodGroup at priority ``soak-low`` (100);
- ``roles``: a gang with role minimums (``cogate.dev/role-minimums``, roles read from the
  ``soak-role`` label): a ReplicaSet of 1 ``leader`` and one of 2-4 ``worker`` (minimum: one fewer
  than the workers when there are more than 2, else all), minMember the sum of the minimums;
- ``scale-up``: a ReplicaSet gang of 2-3 x 4 CPU that only the autoscaled pool admits (node
  selector ``cogate-soak: scaled`` and a toleration of that pool's taint): it waits for
  cluster-autoscaler's nodes through a ProvisioningRequest, or takes room left on them.

Every object is labelled ``soak=<workload>``; pods request memory 64Mi and never run anything
(kwok nodes). Every PodGroup but the ``scale-up`` ones is annotated ``cogate.dev/provisioning:
"false"``: only the pool's gangs ask cluster-autoscaler (the others could not use its nodes, and
a request per waiting gang would keep it busy with answers of no).
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from cogate.api import API_VERSION, GROUP, KIND, PLURAL, POD_GROUP_LABEL, VERSION

#: kind -> weight of the seeded choice.
KINDS: dict[str, int] = {"replicaset": 4, "job": 2, "indexed-job": 2, "statefulset": 2, "high-priority": 2,
                         "never-fits": 1, "filler": 3, "roles": 2, "scale-up": 2}
#: The autoscaled pool: its nodes' label and taint (key ``cogate-soak``, value ``scaled``).
POOL_KEY, SCALED = "cogate-soak", "scaled"
ROLE_LABEL = "soak-role"
#: PriorityClass name -> value.
PRIORITIES = {"soak-low": 100, "soak-mid": 500, "soak-high": 1000, "soak-canary": 2000}
COMPLETE_DELAY = "pod-complete.stage.kwok.x-k8s.io/delay"


@dataclass
class Workload:
    ns: str
    name: str
    kind: str
    members: int
    created: float
    lifetime: float
    gang: bool = True


def pod_template(name: str, group: str | None, cpu: str, priority: str, restart: str = "Always",
                 annotations: dict[str, str] | None = None, role: str = "", scaled: bool = False) -> dict[str, Any]:
    labels = {"soak": name}
    if group:
        labels[POD_GROUP_LABEL] = group
    if role:
        labels[ROLE_LABEL] = role
    res = {"cpu": cpu, "memory": "64Mi"}
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "registry.invalid/soak:1",
                                            "resources": {"requests": res, "limits": res}}],
                            "terminationGracePeriodSeconds": 0, "priorityClassName": priority,
                            "restartPolicy": restart}
    if scaled:
        spec["nodeSelector"] = {POOL_KEY: SCALED}
        spec["tolerations"] = [{"key": POOL_KEY, "operator": "Equal", "value": SCALED, "effect": "NoSchedule"}]
    return {"metadata": {"labels": labels, "annotations": dict(annotations or {})}, "spec": spec}


def _replica_set(name: str, workload: str, n: int, template: dict[str, Any], role: str = "") -> dict[str, Any]:
    sel = {"soak": workload, **({ROLE_LABEL: role} if role else {})}
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "labels": {"soak": workload}},
            "spec": {"replicas": n, "selector": {"matchLabels": sel}, "template": template}}


def role_minimums(workers: int) -> dict[str, int]:
    """The ``roles`` kind's minimums: 1 leader; one worker fewer than ``workers`` when more than 2, else all."""
    return {"leader": 1, "worker": workers - 1 if workers > 2 else workers}


def manifests(kind: str, name: str, n: int, cpu: str, rng: random.Random) -> list[dict[str, Any]]:
    """The objects of one workload (its PodGroup first, if any)."""
    group = None if kind == "filler" else name
    priority = {"filler": "soak-low", "high-priority": "soak-high"}.get(kind, "soak-mid")
    out: list[dict[str, Any]] = []
    if group:
        annotations = {} if kind == "scale-up" else {"cogate.dev/provisioning": "false"}
        min_member = n
        if kind == "roles":
            minimums = role_minimums(n - 1)
            annotations.update({"cogate.dev/role-label": ROLE_LABEL, "cogate.dev/role-minimums": json.dumps(minimums)})
            min_member = sum(minimums.values())
        out.append({"apiVersion": API_VERSION, "kind": KIND,
                    "metadata": {"name": name, "labels": {"soak": name}, "annotations": annotations},
                    "spec": {"minMember": min_member}})
    sel = {"matchLabels": {"soak": name}}
    if kind in ("job", "indexed-job"):
        tmpl = pod_template(name, group, cpu, priority, "Never", {COMPLETE_DELAY: f"{rng.randint(20, 60)}s"})
        spec = {"parallelism": n, "completions": n, "backoffLimit": 6, "template": tmpl}
        if kind == "indexed-job":
            spec["completionMode"] = "Indexed"
        out.append({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": {"soak": name}},
                    "spec": spec})
    elif kind == "statefulset":
        out.append({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name, "labels": {"soak": name}},
                    "spec": {"replicas": n, "serviceName": name, "podManagementPolicy": "Parallel", "selector": sel,
                             "template": pod_template(name, group, cpu, priority)}})
    elif kind == "roles":
        out.append(_replica_set(f"{name}-leader", name, 1, pod_template(name, group, "1", priority, role="leader"),
                                "leader"))
        out.append(_replica_set(f"{name}-worker", name, n - 1,
                                pod_template(name, group, cpu, priority, role="worker"), "worker"))
    else:
        out.append(_replica_set(name, name, n, pod_template(name, group, cpu, priority, scaled=kind == "scale-up")))
    return out


def shape(kind: str, rng: random.Random) -> tuple[int, str, float]:
    """(members, CPU per member, lifetime seconds) of a new workload of ``kind``."""
    if kind == "high-priority":
        return rng.randint(3, 4), f"{rng.choice((3000, 3500, 4000))}m", rng.uniform(60, 150)
    if kind == "never-fits":
        return 2, "64", rng.uniform(120, 300)
    if kind == "filler":
        return rng.randint(6, 12), "1", rng.uniform(120, 300)
    if kind == "statefulset":
        return rng.randint(2, 3), f"{rng.choice((500, 1000, 1500))}m", rng.uniform(60, 180)
    if kind == "roles":  # 1 leader + 2-4 workers
        return rng.randint(3, 5), f"{rng.choice((500, 1000, 1500))}m", rng.uniform(60, 180)
    if kind == "scale-up":
        return rng.randint(2, 3), "4", rng.uniform(60, 150)
    return rng.randint(2, 4), f"{rng.choice((500, 1000, 1500, 2000))}m", rng.uniform(60, 180)


def create(api: client.ApiClient, ns: str, body: dict[str, Any]) -> None:
    kind = body["kind"]
    if kind == KIND:
        client.CustomObjectsApi(api).create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body,
                                                                     _preload_content=False)
    elif kind == "Job":
        client.BatchV1Api(api).create_namespaced_job(ns, body, _preload_content=False)
    elif kind == "StatefulSet":
        client.AppsV1Api(api).create_namespaced_stateful_set(ns, body, _preload_content=False)
    else:
        client.AppsV1Api(api).create_namespaced_replica_set(ns, body, _preload_content=False)


def delete(api: client.ApiClient, w: Workload) -> None:
    """Delete a workload's owner (Background: its pods follow) and then its PodGroup; 404s ignored."""
    apps, batch = client.AppsV1Api(api), client.BatchV1Api(api)
    calls: list[Callable[[], Any]] = []
    if w.kind in ("job", "indexed-job"):
        calls.append(lambda: batch.delete_namespaced_job(w.name, w.ns, propagation_policy="Background"))
    elif w.kind == "statefulset":
        calls.append(lambda: apps.delete_namespaced_stateful_set(w.name, w.ns, propagation_policy="Background"))
    elif w.kind == "roles":
        for part in ("leader", "worker"):
            calls.append(lambda part=part: apps.delete_namespaced_replica_set(f"{w.name}-{part}", w.ns,
                                                                              propagation_policy="Background"))
    else:
        calls.append(lambda: apps.delete_namespaced_replica_set(w.name, w.ns, propagation_policy="Background"))
    if w.gang:
        calls.append(lambda: client.CustomObjectsApi(api).delete_namespaced_custom_object(
            GROUP, VERSION, w.ns, PLURAL, w.name))
    for call in calls:
        try:
            call()
        except client.ApiException as exc:
            if exc.status != 404:
                raise


class Workloads:
    """The stream (module doc) into namespaces ``namespaces`` through ``api``; ``clock()``: soak time."""

    def __init__(self, api: client.ApiClient, namespaces: list[str], seed: int, clock: Callable[[], float],
                 cap: int = 16, step: float = 4.0) -> None:
        self.api, self.namespaces, self.clock = api, namespaces, clock
        self.rng = random.Random(f"workloads-{seed}")
        self.cap, self.step = cap, step
        self.live: list[Workload] = []
        self.created: dict[str, int] = {k: 0 for k in KINDS}
        self.member_deletions = 0
        self.errors: list[str] = []
        self._n = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="soak-workloads", daemon=True)

    def start(self) -> "Workloads":
        self._thread.start()
        return self

    def stop(self, delete_all: bool = False) -> None:
        self._stop.set()
        self._thread.join(60)
        if delete_all:
            for w in self.live:
                self._try(lambda w=w: delete(self.api, w))
            self.live.clear()

    def _try(self, fn: Callable[[], Any]) -> None:
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - the API server may be restarting: noted, the stream goes on
            self.errors.append(f"t={self.clock():.1f} {type(exc).__name__}: {str(exc)[:160]}")

    def _loop(self) -> None:
        while not self._stop.wait(self.step):
            now = self.clock()
            for w in [w for w in self.live if now - w.created > w.lifetime]:
                self.live.remove(w)
                self._try(lambda w=w: delete(self.api, w))
            if len(self.live) < self.cap:
                self._try(self._new)
            if self.rng.random() < 0.3:
                self._try(self._delete_member)

    def _new(self) -> None:
        kind = self.rng.choices(list(KINDS), weights=list(KINDS.values()))[0]
        n, cpu, lifetime = shape(kind, self.rng)
        self._n += 1
        name = f"{kind.split('-')[0][:5]}-{self._n}"
        ns = self.namespaces[self._n % len(self.namespaces)]
        w = Workload(ns, name, kind, n, self.clock(), lifetime, gang=kind != "filler")
        self.live.append(w)
        for body in manifests(kind, name, n, cpu, self.rng):
            create(self.api, ns, body)
        self.created[kind] += 1

    def _delete_member(self) -> None:
        gangs = [w for w in self.live if w.kind in ("replicaset", "statefulset", "high-priority", "roles", "scale-up")]
        if not gangs:
            return
        w = self.rng.choice(gangs)
        core = client.CoreV1Api(self.api)
        pods = core.list_namespaced_pod(w.ns, label_selector=f"soak={w.name}").items
        bound = sorted(p.metadata.name for p in pods if p.spec.node_name and not p.metadata.deletion_timestamp)
        if bound:
            core.delete_namespaced_pod(self.rng.choice(bound), w.ns, grace_period_seconds=0)
            self.member_deletions += 1
