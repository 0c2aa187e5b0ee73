"""Differential test of cogate's planner against the real kube-scheduler.

For each seeded scenario the runner builds a random cluster on the local control
plane (kwok nodes with varied allocatable, labels, taints, some cordoned; existing
pods bound directly with ``spec.nodeName``) and a random group of gated members
(varied requests incl. init containers, sidecars and RuntimeClass overhead;
``nodeSelector``, required node affinity, tolerations, host ports, required pod
(anti-)affinity, topology spread constraints). It reads nodes and pods back from the API, asks the planner
(:func:`cogate.controller.planning.planner.decide`), then releases **every** member whatever
the planner said (:func:`cogate.controller.planning.patches.release_patch`; placement
``pinned`` narrows each planned member to its planned node, ``free`` only removes
the gate) and watches kube-scheduler bind them.

Classification of one scenario (``min_member`` = the group's minMember):

======  =====================================================================
TP      planner ``Released`` and kube-scheduler bound >= minMember members
TN      planner did not release and kube-scheduler bound < minMember members
FP      planner ``Released`` but fewer than minMember bound: the "never
        half-placed" promise is broken
FN      planner did not release but kube-scheduler bound >= minMember
======  =====================================================================

Settling: the scheduler is done when every member is bound or reported
``PodScheduled=False`` reason ``Unschedulable`` and nothing changed for
``--stable`` seconds (default 2 s; capped at ``--settle-timeout``, 15 s). Members
are priority 0 and nothing frees room during the wait, so a settled state is final.

Every scenario is a pure function of its seed (:func:`generate`); FP/FN cases are
saved with the scenario and the exact API snapshot the planner saw (nodes and pods
as JSON), so they can be replayed (``--replay``) and turned into planner unit tests.

Script use (starts its own control plane unless ``--kubeconfig`` is given)::

    python -m tests.e2e.differential --count 200 --seed 1000 --placement both --out results.json

The cluster's fake nodes (label ``type=kwok``) are **replaced** by each scenario's
nodes and deleted at the end of the run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cogate.controller.model.records import node_info, pod_info
from cogate.controller.planning.planner import GroupRequest, PlannerConfig, decide
from cogate.controller.planning.planner import Outcome as PlannerOutcome
from cogate.controller.planning.patches import release_patch
from cogate.localcluster.nodes import node_manifest
from cogate.localcluster import provenance

from .kube import wait_for

__all__ = [
    "GATE",
    "PLACEMENTS",
    "Outcome",
    "generate",
    "classify",
    "Runner",
    "summarize",
    "replay_planner",
    "main",
]

#: A scheduling gate cogate's controller does not own (the test releases members itself).
GATE = "test.cogate.dev/differential"
PLACEMENTS = ("pinned", "free")
#: Labels and taints the generator draws from.
ZONE, DISK, RANK = "cogate.test/zone", "cogate.test/disk", "cogate.test/rank"
TAINTS = (
    {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
    {"key": "dedicated", "value": "infra", "effect": "NoExecute"},
    {"key": "spot", "value": "true", "effect": "PreferNoSchedule"},
    {"key": "maintenance", "effect": "NoSchedule"},
)
CORDON_KEY = "node.kubernetes.io/unschedulable"
NOT_READY_KEY = "node.kubernetes.io/not-ready"
GPU = "nvidia.com/gpu"
RUNTIME_CLASS = "cogate-differential-overhead"
RUNTIME_OVERHEAD = {"cpu": "250m", "memory": "64Mi"}
IMAGE = "registry.invalid/app:1"
HOST_PORT = 8080
MEMBER_LABEL = "cogate.test/member"  # value: group name
APP_LABEL = "app"  # anti-affinity selects app=<group>


# ------------------------------------------------------------------------- the generator (pure)

_CPU = ("100m", "250m", "500m", "750m", "1", "1500m", "2", "3", "4")
_MEM = ("128Mi", "256Mi", "512Mi", "1Gi", "2Gi", "3Gi", "4Gi", "6Gi", "8Gi")


def _gen_node(rng: random.Random, name: str) -> dict[str, Any]:
    labels: dict[str, str] = {}
    if rng.random() < 0.8:
        labels[ZONE] = rng.choice("abc")
    if rng.random() < 0.6:
        labels[DISK] = rng.choice(("ssd", "hdd"))
    if rng.random() < 0.5:
        labels[RANK] = str(rng.randint(1, 9))
    taints = []
    if rng.random() < 0.2:
        taints = [dict(t) for t in rng.sample(TAINTS, rng.randint(1, 2))]
    extended = {GPU: str(rng.randint(1, 4))} if rng.random() < 0.25 else {}
    return {
        "name": name,
        "cpu": str(rng.randint(1, 16)),
        "memory": f"{rng.randint(1, 32)}Gi",
        "pods": rng.randint(3, 30),
        "extended": extended,
        "labels": labels,
        "taints": taints,
        "unschedulable": rng.random() < 0.08,
    }


_MILLI = {"100m": 100, "250m": 250, "500m": 500, "750m": 750, "1": 1000, "1500m": 1500, "2": 2000, "3": 3000,
          "4": 4000}
_MIB = {"128Mi": 128, "256Mi": 256, "512Mi": 512, "1Gi": 1024, "2Gi": 2048, "3Gi": 3072, "4Gi": 4096,
        "6Gi": 6144, "8Gi": 8192}


def _container(name: str, cpu: str, mem: str, gpu: int = 0, *, limits_only: bool = False,
               port: bool = False) -> dict[str, Any]:
    res: dict[str, Any] = {"cpu": cpu, "memory": mem}
    if gpu:
        res[GPU] = str(gpu)
    c: dict[str, Any] = {"name": name, "image": IMAGE}
    if limits_only:
        c["resources"] = {"limits": dict(res)}
    else:
        c["resources"] = {"requests": dict(res)}
        if gpu:
            c["resources"]["limits"] = {GPU: str(gpu)}
    if port:
        c["ports"] = [{"containerPort": HOST_PORT, "hostPort": HOST_PORT, "protocol": "TCP"}]
    return c


def _gen_existing(rng: random.Random, nodes: Sequence[Mapping[str, Any]], group: str) -> list[dict[str, Any]]:
    """Pods bound directly to nodes; each fits the node's remaining room (as a kubelet would admit it)."""
    out: list[dict[str, Any]] = []
    for node in nodes:
        cpu_left = int(node["cpu"]) * 1000
        mem_left = int(node["memory"].removesuffix("Gi")) * 1024
        gpu_left = int(node["extended"].get(GPU, 0))
        slots = node["pods"]
        port_used = False
        for _ in range(rng.choice((0, 0, 1, 1, 2, 3, 4))):
            if slots <= 1:
                break
            cpu = rng.choice(_CPU)
            mem = rng.choice(_MEM)
            gpu = rng.randint(1, gpu_left) if gpu_left and rng.random() < 0.4 else 0
            if _MILLI[cpu] > cpu_left or _MIB[mem] > mem_left:
                continue
            port = not port_used and rng.random() < 0.15
            labels = {"cogate.test/existing": "true"}
            if rng.random() < 0.15:
                labels[APP_LABEL] = group  # collides with the members' anti-affinity
            if rng.random() < 0.2:
                labels["role"] = "db"  # target of the members' pod affinity
            name = f"x{len(out)}"
            out.append({
                "name": name,
                "node": node["name"],
                "labels": labels,
                "spec": {
                    "containers": [_container("app", cpu, mem, gpu, port=port)],
                    "tolerations": [{"operator": "Exists"}],  # never evicted by NoExecute taints
                },
            })
            cpu_left -= _MILLI[cpu]
            mem_left -= _MIB[mem]
            gpu_left -= gpu
            slots -= 1
            port_used = port_used or port
    return out


def _gen_node_affinity(rng: random.Random) -> dict[str, Any]:
    def req() -> dict[str, Any]:
        op = rng.choice(("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "In"))
        if op in ("Gt", "Lt"):
            return {"key": RANK, "operator": op, "values": [str(rng.randint(1, 9))]}
        key = rng.choice((ZONE, DISK))
        vals = list("abc") if key == ZONE else ["ssd", "hdd"]
        if op in ("Exists", "DoesNotExist"):
            return {"key": key, "operator": op}
        return {"key": key, "operator": op, "values": sorted(rng.sample(vals, rng.randint(1, len(vals) - 1)))}

    terms = [{"matchExpressions": [req() for _ in range(rng.randint(1, 2))]} for _ in range(rng.randint(1, 2))]
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}


def _gen_tolerations(rng: random.Random) -> list[dict[str, Any]]:
    r = rng.random()
    if r < 0.35:
        return []
    if r < 0.55:
        return [{"operator": "Exists"}]
    tols = []
    for t in rng.sample(TAINTS, rng.randint(1, len(TAINTS))):
        if rng.random() < 0.3:
            tols.append({"key": t["key"], "operator": "Exists"})
        else:
            tol = {"key": t["key"], "operator": "Equal", "value": t.get("value", ""), "effect": t["effect"]}
            tols.append(tol)
    if rng.random() < 0.2:
        tols.append({"key": CORDON_KEY, "operator": "Exists", "effect": "NoSchedule"})
    return tols


def _gen_spread(rng: random.Random, group: str) -> list[dict[str, Any]]:
    """One or two topology spread constraints (kube-scheduler PodTopologySpread): mostly
    ``DoNotSchedule`` on hostname or zone, with the optional fields drawn now and then."""
    out = []
    keys = ["kubernetes.io/hostname" if rng.random() < 0.6 else ZONE]
    if rng.random() < 0.2:  # a second constraint on the other key (the API refuses a repeated key)
        keys.append(ZONE if keys[0] != ZONE else "kubernetes.io/hostname")
    for key in keys:
        c: dict[str, Any] = {
            "maxSkew": rng.choice((1, 1, 2)),
            "topologyKey": key,
            "whenUnsatisfiable": "DoNotSchedule" if rng.random() < 0.85 else "ScheduleAnyway",
            "labelSelector": {"matchLabels": {APP_LABEL: group}},
        }
        if c["whenUnsatisfiable"] == "DoNotSchedule" and rng.random() < 0.2:
            c["minDomains"] = rng.randint(2, 4)
        if rng.random() < 0.15:
            c["nodeAffinityPolicy"] = "Ignore"
        if rng.random() < 0.2:
            c["nodeTaintsPolicy"] = "Honor"
        if rng.random() < 0.15:
            c["matchLabelKeys"] = [MEMBER_LABEL]
        out.append(c)
    return out


def _gen_template(rng: random.Random, group: str, nodes: Sequence[Mapping[str, Any]], n: int) -> dict[str, Any]:
    """One member pod spec. Requests are sized against the cluster (``tightness`` x the
    schedulable cpu/memory shared by ``n`` members) so that many scenarios sit near the
    fit / no-fit boundary."""
    usable = [x for x in nodes if not x["unschedulable"]] or list(nodes)
    tight = rng.uniform(0.1, 1.1)
    cap = rng.uniform(0.2, 1.0)  # and at most this share of one (random) schedulable node
    ref = rng.choice(usable)
    cpus = [int(x["cpu"]) * 1000 for x in usable]
    mems = [int(x["memory"].removesuffix("Gi")) * 1024 for x in usable]
    cpu_m = max(50, int(min(tight * sum(cpus) / n, cap * int(ref["cpu"]) * 1000)) // 50 * 50)
    mem_mi = max(64, int(min(tight * sum(mems) / n, cap * int(ref["memory"].removesuffix("Gi")) * 1024)) // 64 * 64)
    gpu_nodes = [x for x in nodes if x["extended"].get(GPU)]
    gpu = 1 if gpu_nodes and rng.random() < 0.2 else 0
    port = rng.random() < 0.12
    spec: dict[str, Any] = {
        "containers": [_container("main", f"{cpu_m}m", f"{mem_mi}Mi", gpu,
                                  limits_only=rng.random() < 0.15, port=port)],
    }
    init = []
    if rng.random() < 0.2:  # a plain init container, sometimes larger than the main one
        f = rng.uniform(0.5, 1.5)
        init.append(_container("init", f"{max(50, int(cpu_m * f) // 50 * 50)}m", f"{max(64, int(mem_mi * f))}Mi"))
    if rng.random() < 0.15:  # a restartable (sidecar) init container: adds to the sum
        side = _container("sidecar", rng.choice(_CPU[:3]), rng.choice(_MEM[:3]))
        side["restartPolicy"] = "Always"
        init.append(side)
    if init:
        spec["initContainers"] = init
    if rng.random() < 0.1:
        spec["runtimeClassName"] = RUNTIME_CLASS  # overhead set by the RuntimeClass admission plugin
    if rng.random() < 0.1:
        spec["nodeSelector"] = rng.choice(({ZONE: rng.choice("abc")}, {DISK: "ssd"}, {DISK: "hdd"}))
    affinity: dict[str, Any] = {}
    if rng.random() < 0.15:
        affinity["nodeAffinity"] = _gen_node_affinity(rng)
    if rng.random() < 0.15:
        key = "kubernetes.io/hostname" if rng.random() < 0.8 else ZONE
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {APP_LABEL: group}}, "topologyKey": key}]}
    if rng.random() < 0.05:
        affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"role": "db"}}, "topologyKey": ZONE}]}
    if affinity:
        spec["affinity"] = affinity
    tols = _gen_tolerations(rng)
    if tols:
        spec["tolerations"] = tols
    return spec


def _generate_tight(rng: random.Random, seed: int) -> dict[str, Any]:
    """A packing puzzle: 2-4 identical plain nodes filled (nearly) exactly by a group of
    "big" members (more than half a node) and "small" ones, the small ones created (and
    so released and queued) first. A perfect packing exists by construction; a scheduler
    that spreads the small members over every node leaves no node with room for a big one.
    """
    group = "g"
    k = rng.randint(2, 4)
    cpu = rng.choice((2, 4, 8))
    nodes = [{"name": f"n{i}", "cpu": str(cpu), "memory": "16Gi", "pods": 30, "extended": {},
              "labels": {ZONE: "abc"[i % 3]}, "taints": [], "unschedulable": False} for i in range(k)]
    big = int(cpu * 1000 * rng.uniform(0.55, 0.85)) // 50 * 50
    small = rng.choice((250, 500)) if cpu > 2 else 250
    n_big, n_small = 0, 0
    for _ in range(k):
        if rng.random() < 0.7:
            n_big += 1
            n_small += (cpu * 1000 - big) // small
        else:
            n_small += cpu * 1000 // small
    n_big = max(n_big, 1)
    n_small = min(max(n_small, 1), 12)
    spec_small = {"containers": [_container("main", f"{small}m", "256Mi")]}
    spec_big = {"containers": [_container("main", f"{big}m", "256Mi")]}
    members = [{"name": f"m{i:02d}", "labels": {APP_LABEL: group, MEMBER_LABEL: group},
                "spec": spec_small if i < n_small else spec_big} for i in range(n_small + n_big)]
    return {"seed": seed, "family": "tight", "nodes": nodes, "existing": [], "members": members,
            "min_member": len(members)}


#: DRA (issue 17): the models devices of the ``devices`` family have, the API group and version.
DEVICE_MODELS = ("a100", "h100")
DRA_GROUP, DRA_VERSION = "resource.k8s.io", "v1"


def _generate_devices(rng: random.Random, seed: int) -> dict[str, Any]:
    """DRA devices: 2-4 plain nodes (CPU plentiful) publishing 0-4 devices each (model a100 or
    h100) in one ResourceSlice of the scenario's own driver and DeviceClass; 0-3 existing pods
    holding one device each (scheduled by kube-scheduler onto a chosen node, so their claims
    are allocated for real); 2-6 gated members, each with a ResourceClaim of its own asking for
    1 or 2 devices, some narrowed to one model by a CEL selector."""
    nodes = [{"name": f"n{i}", "cpu": "16", "memory": "32Gi", "pods": 30, "extended": {}, "labels": {},
              "taints": [], "unschedulable": False} for i in range(rng.randint(2, 4))]
    devices = {n["name"]: [rng.choice(DEVICE_MODELS) for _ in range(rng.randint(0, 4))] for n in nodes}
    with_devices = [n for n, ds in devices.items() if ds]
    existing = []
    for i in range(rng.randint(0, 3) if with_devices else 0):
        existing.append({"name": f"e{i}", "node": rng.choice(with_devices), "count": 1, "model": ""})
    members = []
    for i in range(rng.randint(2, 6)):
        model = rng.choice(DEVICE_MODELS) if rng.random() < 0.3 else ""
        members.append({"name": f"m{i}", "labels": {APP_LABEL: "g", MEMBER_LABEL: "g"},
                        "spec": {"containers": [_container("main", "100m", "64Mi")]},
                        "count": rng.choice((1, 1, 2)), "model": model})
    r = rng.random()
    n = len(members)
    min_member = n if r < 0.7 else rng.randint(1, n)
    return {"seed": seed, "family": "devices", "nodes": nodes, "existing": [], "members": members,
            "min_member": min_member, "devices": devices, "device_pods": existing}


def generate(seed: int, family: str = "mixed") -> dict[str, Any]:
    """The scenario of ``seed`` in ``family`` (pure, deterministic): a JSON-able dict.

    Families: ``mixed`` (the default: random nodes, taints, cordons, existing pods,
    selectors, affinities, tolerations, host ports, init containers, overhead, topology
    spread),
    ``tight`` (see :func:`_generate_tight`: exact packing puzzles on plain nodes) and ``devices``
    (see :func:`_generate_devices`: DRA devices in ResourceSlices, members with ResourceClaims;
    extra keys ``devices`` (node -> models) and ``device_pods``).
    Raises ``ValueError`` for another family.

    Keys: ``seed``, ``family``; ``nodes`` (keyword arguments of
    :func:`cogate.localcluster.nodes.node_manifest`, logical names ``n0``...);
    ``existing`` (pods bound with ``spec.nodeName``: ``name``, ``node``, ``labels``,
    ``spec``); ``members`` (gated pods: ``name``, ``labels``, ``spec``);
    ``min_member`` (1 <= min_member <= len(members)).
    """
    rng = random.Random(seed)
    if family == "tight":
        return _generate_tight(rng, seed)
    if family == "devices":
        return _generate_devices(rng, seed)
    if family != "mixed":
        raise ValueError(f"family: expected 'mixed', 'tight' or 'devices', got {family!r}")
    group = "g"
    nodes = [_gen_node(rng, f"n{i}") for i in range(rng.choice((1, 2, 2, 3, 3, 4, 4, 5, 6)))]
    existing = _gen_existing(rng, nodes, group)
    n = rng.randint(2, 8)
    templates = [_gen_template(rng, group, nodes, n) for _ in range(1 if rng.random() < 0.6 else 2)]
    members = []
    for i in range(n):
        members.append({
            "name": f"m{i}",
            "labels": {APP_LABEL: group, MEMBER_LABEL: group},
            "spec": templates[0] if i < (n + 1) // 2 or len(templates) == 1 else templates[1],
        })
    r = rng.random()
    min_member = n if r < 0.7 else (n - 1 if r < 0.85 else rng.randint(1, n))
    # drawn last, so the rest of a seed's scenario is what it was before spread was added
    for t in templates:
        if rng.random() < 0.3:
            t["topologySpreadConstraints"] = _gen_spread(rng, group)
    return {"seed": seed, "family": "mixed", "nodes": nodes, "existing": existing, "members": members,
            "min_member": max(1, min_member)}


def classify(released: bool, bound: int, min_member: int) -> str:
    """TP/TN/FP/FN of one scenario: the planner's ``Released`` against kube-scheduler's bound count."""
    if released:
        return "TP" if bound >= min_member else "FP"
    return "FN" if bound >= min_member else "TN"


# ------------------------------------------------------------------------------ the runner (I/O)


@dataclass
class Outcome:
    """What happened in one scenario run (JSON-able via :meth:`as_dict`)."""

    seed: int
    family: str
    placement: str
    min_member: int
    members: int
    verdict: str
    message: str
    fits: int  # GroupVerdict.fits: members the planner counts as placed (bound + planned)
    planned: dict[str, str]
    bound: dict[str, str]
    unschedulable: dict[str, str]
    classification: str
    seconds: float
    snapshot: dict[str, Any] | None = field(default=None)

    def as_dict(self, with_snapshot: bool = False) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "snapshot"}
        if with_snapshot and self.snapshot is not None:
            d["snapshot"] = self.snapshot
        return d


class Runner:
    """Runs scenarios on a cluster reached through ``api`` (a ``kubernetes.client.ApiClient``).

    Replaces every node labelled ``type=kwok`` by each scenario's nodes; each scenario
    gets a fresh namespace, deleted (pods with grace period 0) afterwards.
    """

    def __init__(self, api: Any, *, stable: float = 2.0, settle_timeout: float = 15.0,
                 log: Callable[[str], None] | None = None) -> None:
        from kubernetes import client

        self.api = api
        self.core = client.CoreV1Api(api)
        self.client = client
        self.stable = stable
        self.settle_timeout = settle_timeout
        self.log = log or (lambda s: None)
        self.token = secrets.token_hex(2)
        self.counter = 0
        self._ensure_runtime_class()

    # -- raw JSON reads (the shape the informers hand the controller) ------------
    def _json(self, resp: Any) -> dict[str, Any]:
        return json.loads(resp.data)

    def list_nodes(self, selector: str | None = None) -> list[dict[str, Any]]:
        return self._json(self.core.list_node(label_selector=selector, _preload_content=False))["items"]

    def list_pods(self, namespace: str | None = None, selector: str | None = None) -> list[dict[str, Any]]:
        if namespace is None:
            resp = self.core.list_pod_for_all_namespaces(label_selector=selector, _preload_content=False)
        else:
            resp = self.core.list_namespaced_pod(namespace, label_selector=selector, _preload_content=False)
        items = self._json(resp)["items"]
        for p in items:  # list items omit kind/apiVersion; pod_info does not need them
            p.setdefault("kind", "Pod")
            p.setdefault("apiVersion", "v1")
        return items

    def _ensure_runtime_class(self) -> None:
        node_api = self.client.NodeV1Api(self.api)
        body = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": RUNTIME_CLASS},
                "handler": "kwok", "overhead": {"podFixed": dict(RUNTIME_OVERHEAD)}}
        try:
            node_api.create_runtime_class(body)
        except self.client.ApiException as e:
            if e.status != 409:
                raise

    # -- cluster setup -------------------------------------------------------------
    def delete_fake_nodes(self) -> None:
        for n in self.list_nodes("type=kwok"):
            try:
                self.core.delete_node(n["metadata"]["name"], grace_period_seconds=0)
            except self.client.ApiException as e:
                if e.status != 404:
                    raise
        wait_for(lambda: not self.list_nodes("type=kwok"), 60, what="fake nodes deleted")

    def _nodes_settled(self, names: Mapping[str, Mapping[str, Any]]) -> bool:
        got = {n["metadata"]["name"]: n for n in self.list_nodes("type=kwok")}
        for name, shape in names.items():
            n = got.get(name)
            if n is None:
                return False
            conds = {c.get("type"): c.get("status") for c in (n.get("status") or {}).get("conditions") or []}
            if conds.get("Ready") != "True":
                return False
            keys = {t.get("key") for t in (n.get("spec") or {}).get("taints") or []}
            if NOT_READY_KEY in keys:
                return False  # the node lifecycle controller has not lifted the not-ready taint yet
            if shape["unschedulable"] and CORDON_KEY not in keys:
                return False  # ... nor tainted the cordoned node
        return True

    def create_nodes(self, scenario: Mapping[str, Any], prefix: str) -> dict[str, str]:
        """Create the scenario's nodes as ``<prefix><logical name>``; wait until settled. Returns logical -> real."""
        names = {n["name"]: f"{prefix}{n['name']}" for n in scenario["nodes"]}
        shapes = {}
        for n in scenario["nodes"]:
            real = names[n["name"]]
            body = node_manifest(real, cpu=n["cpu"], memory=n["memory"], pods=n["pods"], extended=n["extended"],
                                 labels=n["labels"], taints=n["taints"], kwok_taint=False,
                                 unschedulable=n["unschedulable"])
            self.core.create_node(body)
            shapes[real] = n
        wait_for(lambda: self._nodes_settled(shapes), 60, what=f"nodes {sorted(shapes)} Ready and settled")
        return names

    def _pod_body(self, name: str, labels: Mapping[str, str], spec: Mapping[str, Any], **extra: Any) -> dict:
        s = json.loads(json.dumps(spec))
        s.setdefault("terminationGracePeriodSeconds", 0)
        s.update(extra)
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": dict(labels)}, "spec": s}

    # -- one scenario -------------------------------------------------------------------
    def run(self, scenario: Mapping[str, Any], placement: str) -> Outcome:
        """Run ``scenario`` (from :func:`generate`) with ``placement`` ``pinned`` or ``free``."""
        if placement not in PLACEMENTS:
            raise ValueError(f"placement: expected one of {PLACEMENTS}, got {placement!r}")
        t0 = time.monotonic()
        self.counter += 1
        tag = f"d{self.token}-{self.counter}"
        self.delete_fake_nodes()
        ns = tag
        self.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        try:
            names = self.create_nodes(scenario, f"{tag}-")
            return self._run_in(scenario, placement, ns, names, t0)
        finally:
            self._cleanup(ns)

    # -- DRA (the devices family) -------------------------------------------------------
    def _dra_setup(self, scenario: Mapping[str, Any], ns: str, names: Mapping[str, str]) -> str:
        """The scenario's DeviceClass and ResourceSlices (its own driver, named after ``ns``), the
        claims of its device pods and members; the device pods scheduled by kube-scheduler onto
        their nodes (their claims allocated for real). Returns the driver."""
        custom = self.client.CustomObjectsApi(self.api)
        driver = f"{ns}.example.com"
        custom.create_cluster_custom_object(DRA_GROUP, DRA_VERSION, "deviceclasses", {
            "apiVersion": f"{DRA_GROUP}/{DRA_VERSION}", "kind": "DeviceClass", "metadata": {"name": driver},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}})
        for node, models in scenario["devices"].items():
            if not models:
                continue
            custom.create_cluster_custom_object(DRA_GROUP, DRA_VERSION, "resourceslices", {
                "apiVersion": f"{DRA_GROUP}/{DRA_VERSION}", "kind": "ResourceSlice",
                "metadata": {"name": f"{names[node]}-{driver}"},
                "spec": {"driver": driver, "nodeName": names[node],
                         "pool": {"name": names[node], "generation": 1, "resourceSliceCount": 1},
                         "devices": [{"name": f"d{i}", "attributes": {"model": {"string": m}}}
                                     for i, m in enumerate(models)]}})
        for p in [*scenario["device_pods"], *scenario["members"]]:
            exactly: dict[str, Any] = {"deviceClassName": driver, "count": p["count"]}
            if p["model"]:
                exactly["selectors"] = [{"cel": {"expression": f'device.attributes["{driver}"].model == '
                                                               f'"{p["model"]}"'}}]
            custom.create_namespaced_custom_object(DRA_GROUP, DRA_VERSION, ns, "resourceclaims", {
                "apiVersion": f"{DRA_GROUP}/{DRA_VERSION}", "kind": "ResourceClaim",
                "metadata": {"name": f"c-{p['name']}"},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}})
        for p in scenario["device_pods"]:
            spec = {"containers": [_container("main", "100m", "64Mi")],
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": f"c-{p['name']}"}],
                    "nodeSelector": {"kubernetes.io/hostname": names[p["node"]]}}
            self.core.create_namespaced_pod(ns, self._pod_body(p["name"], {"cogate.test/device-pod": "true"}, spec))
        if scenario["device_pods"]:
            # each lands (its node has a free device: they are drawn before the members) or is Unschedulable
            def settled() -> bool:
                ps = self.list_pods(ns, "cogate.test/device-pod=true")
                return len(ps) == len(scenario["device_pods"]) and all(
                    (p.get("spec") or {}).get("nodeName") or any(
                        c.get("reason") == "Unschedulable" for c in (p.get("status") or {}).get("conditions") or [])
                    for p in ps)
            wait_for(settled, 60, what="device pods scheduled")
        return driver

    def _dra_inputs(self, ns: str) -> Any:
        """The DRA objects as the controller's informers hold them."""
        from cogate.controller.devices import records as dev
        from cogate.controller.devices.dra import DeviceInputs

        custom = self.client.CustomObjectsApi(self.api)

        def items(plural: str, namespaced: bool) -> list[dict[str, Any]]:
            if namespaced:
                return custom.list_namespaced_custom_object(DRA_GROUP, DRA_VERSION, ns, plural)["items"]
            return custom.list_cluster_custom_object(DRA_GROUP, DRA_VERSION, plural)["items"]

        slices = tuple(d for s in items("resourceslices", False) for d in dev.slice_devices(s))
        classes = {c.name: c for c in map(dev.device_class_info, items("deviceclasses", False))}
        claims = {(c.namespace, c.name): c for c in map(dev.device_claim_info, items("resourceclaims", True))}
        return DeviceInputs(slices, classes, claims, {}, 1, 0), items

    def _dra_cleanup(self, ns: str, driver: str) -> None:
        custom = self.client.CustomObjectsApi(self.api)
        for s in custom.list_cluster_custom_object(DRA_GROUP, DRA_VERSION, "resourceslices")["items"]:
            if s["spec"].get("driver") == driver:
                custom.delete_cluster_custom_object(DRA_GROUP, DRA_VERSION, "resourceslices", s["metadata"]["name"])
        try:
            custom.delete_cluster_custom_object(DRA_GROUP, DRA_VERSION, "deviceclasses", driver)
        except self.client.ApiException as e:  # pragma: no cover - best effort
            if e.status != 404:
                raise

    def _run_in(self, scenario: Mapping[str, Any], placement: str, ns: str, names: Mapping[str, str],
                t0: float) -> Outcome:
        driver = self._dra_setup(scenario, ns, names) if scenario.get("family") == "devices" else ""
        try:
            return self._run_scenario(scenario, placement, ns, names, t0, driver)
        finally:
            if driver:
                self._dra_cleanup(ns, driver)

    def _run_scenario(self, scenario: Mapping[str, Any], placement: str, ns: str, names: Mapping[str, str],
                      t0: float, driver: str) -> Outcome:
        for p in scenario["existing"]:
            self.core.create_namespaced_pod(ns, self._pod_body(p["name"], p["labels"], p["spec"],
                                                               nodeName=names[p["node"]]))
        if scenario["existing"]:
            wait_for(lambda: all((p.get("status") or {}).get("phase") == "Running"
                              for p in self.list_pods(ns, "cogate.test/existing=true"))
                     and len(self.list_pods(ns, "cogate.test/existing=true")) == len(scenario["existing"]),
                     60, what="existing pods Running")
        for m in scenario["members"]:
            spec = dict(m["spec"])
            if driver:
                spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"c-{m['name']}"}]
            self.core.create_namespaced_pod(ns, self._pod_body(m["name"], m["labels"], spec,
                                                               schedulingGates=[{"name": GATE}]))
        # the snapshot the planner sees: every node, every pod bound to a node, the group's members
        node_dicts = self.list_nodes()
        all_pods = self.list_pods()
        member_dicts = [p for p in all_pods if p["metadata"].get("namespace") == ns
                        and (p["metadata"].get("labels") or {}).get(MEMBER_LABEL)]
        bound_dicts = [p for p in all_pods if (p.get("spec") or {}).get("nodeName")
                       and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        members = tuple(pod_info(p) for p in member_dicts)
        nodes, bound = [node_info(n) for n in node_dicts], [pod_info(p) for p in bound_dicts]
        dra_snapshot = None
        if driver:  # the devices room's work, over the same snapshot (controller/devices/dra.py)
            from cogate.controller.devices import dra
            from cogate.controller.planning.planstate import PlanningState

            inputs, items = self._dra_inputs(ns)
            resolved, acc = dra.account(members, {p.uid: p.node_name for p in bound}, inputs, dra.Selection())
            members = tuple(resolved)
            nodes = [replace(n, allocatable=dra.with_devices(n.allocatable, acc.allocatable.get(n.name)))
                     for n in nodes]
            bound = [replace(p, requests=dra.with_devices(p.requests, acc.charges.get(p.uid))) for p in bound]
            dra_snapshot = {k: items(k, k == "resourceclaims") for k in ("resourceslices", "deviceclasses",
                                                                       "resourceclaims")}
        group = GroupRequest(namespace=ns, name="g", min_member=scenario["min_member"], created=time.time(),
                             released=False, members=members)
        if driver:
            state = PlanningState.build(nodes, bound)
            for name, held in acc.held.items():
                state.set_held(name, held)
            decision = state.decide([group], [], time.time(), PlannerConfig(gate_name=GATE))
        else:
            decision = decide(nodes, bound, [group], [], time.time(), PlannerConfig(gate_name=GATE))
        verdict = decision.verdicts[0]
        released = verdict.outcome == PlannerOutcome.RELEASED
        uid_name = {p["metadata"]["uid"]: p["metadata"]["name"] for p in member_dicts}
        planned = {uid_name[u]: n for u, n in verdict.release.items() if n} if released else {}

        # release every member whatever the planner said
        for p in member_dicts:
            node = planned.get(p["metadata"]["name"], "") if placement == "pinned" else ""
            ops = release_patch(p, GATE, node)
            if ops:
                self.core.patch_namespaced_pod(p["metadata"]["name"], ns, ops)

        bound, unsched = self._settle(ns, len(member_dicts))
        bound_n = len(bound)
        cls = classify(released, bound_n, scenario["min_member"])
        snapshot = None
        if cls in ("FP", "FN"):
            snapshot = {"nodes": node_dicts, "bound_pods": bound_dicts, "members": member_dicts}
            if dra_snapshot is not None:
                snapshot["dra"] = dra_snapshot
        return Outcome(
            seed=scenario["seed"], family=scenario.get("family", "mixed"), placement=placement, min_member=scenario["min_member"],
            members=len(member_dicts), verdict=verdict.outcome, message=verdict.message, fits=verdict.fits,
            planned=planned,
            bound=bound, unschedulable=unsched, classification=cls, seconds=round(time.monotonic() - t0, 2),
            snapshot=snapshot,
        )

    def _settle(self, ns: str, count: int) -> tuple[dict[str, str], dict[str, str]]:
        """Wait until every member is bound or Unschedulable and stable; returns (bound, unschedulable)."""
        deadline = time.monotonic() + self.settle_timeout
        last: tuple[Any, ...] | None = None
        since = time.monotonic()
        bound: dict[str, str] = {}
        unsched: dict[str, str] = {}
        while True:
            bound, unsched = {}, {}
            for p in self.list_pods(ns, MEMBER_LABEL):
                name = p["metadata"]["name"]
                node = (p.get("spec") or {}).get("nodeName")
                if node:
                    bound[name] = node
                    continue
                for c in (p.get("status") or {}).get("conditions") or []:
                    if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable":
                        unsched[name] = c.get("message", "")
            state = (tuple(sorted(bound.items())), tuple(sorted(unsched)))
            now = time.monotonic()
            if state != last:
                last, since = state, now
            if len(bound) == count:
                return bound, unsched
            if len(bound) + len(unsched) == count and now - since >= self.stable:
                return bound, unsched
            if now >= deadline:
                return bound, unsched
            time.sleep(0.1)

    def _cleanup(self, ns: str) -> None:
        try:
            self.core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
            wait_for(lambda: not self.list_pods(ns), 60, what=f"pods of {ns} deleted")
            self.core.delete_namespace(ns, propagation_policy="Background")
        except self.client.ApiException as e:  # pragma: no cover - best effort
            if e.status != 404:
                raise


def replay_planner(case: Mapping[str, Any]) -> Any:
    """Re-run the planner (pure, no cluster) on a saved FP/FN case of a results file.

    ``case``: an entry of ``cases`` (needs ``snapshot`` with ``nodes``, ``bound_pods``,
    ``members`` as API JSON, and ``min_member``). Returns the
    :class:`~cogate.controller.planning.planner.GroupVerdict`; the starting point of a planner unit test.
    """
    snap = case["snapshot"]
    members = tuple(pod_info(p) for p in snap["members"])
    ns = members[0].namespace if members else "default"
    group = GroupRequest(namespace=ns, name="g", min_member=case["min_member"], created=0.0, released=False,
                         members=members)
    return decide([node_info(n) for n in snap["nodes"]], [pod_info(p) for p in snap["bound_pods"]], [group], [],
                  0.0, PlannerConfig(gate_name=GATE)).verdicts[0]


# ------------------------------------------------------------------------------- reporting / CLI


def summarize(outcomes: Sequence[Outcome]) -> dict[str, dict[str, int]]:
    """Counts of TP/TN/FP/FN per placement (and ``scenarios``)."""
    out: dict[str, dict[str, int]] = {}
    for o in outcomes:
        s = out.setdefault(o.placement, {"scenarios": 0, "TP": 0, "TN": 0, "FP": 0, "FN": 0})
        s["scenarios"] += 1
        s[o.classification] += 1
    return out


def run_facts(settings: dict[str, Any]) -> dict[str, Any]:
    """What a results file records of the run besides its outcomes: the commit (``-dirty`` when the
    checkout had changes other than recorded evidence, ``provenance.RECORDED``), the UTC date, the load
    average and cores, and ``settings``."""
    import datetime

    return {"commit": provenance.git_commit(Path(__file__).resolve().parents[2]),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "load_average": [round(x, 1) for x in os.getloadavg()], "cores": os.cpu_count(),
            "settings": settings}


def _write(path: str, argv: Sequence[str], outcomes: Sequence[Outcome], started: float,
           facts: dict[str, Any] | None = None) -> None:
    doc = {
        "command": "python -m tests.e2e.differential " + " ".join(argv),
        **({"run": facts} if facts else {}),
        "elapsed_seconds": round(time.monotonic() - started, 1),
        "summary": summarize(outcomes),
        "runs": [o.as_dict() for o in outcomes],
        "cases": [dict(o.as_dict(with_snapshot=True), scenario=generate(o.seed, o.family))
                  for o in outcomes if o.classification in ("FP", "FN")],
    }
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
    os.replace(path + ".tmp", path)


#: Where the recorded runs live (one results file per family) and the page rendered from them.
RESULTS_DIR = "docs/results/differential"
RESULTS_PAGE = "docs/results/differential.md"


def report(docs: Mapping[str, Mapping[str, Any]]) -> str:
    """The Markdown page of recorded runs (``docs``: file name -> a results file as written by
    :func:`_write`): per file and placement the TP/TN/FP/FN counts, and per file the command,
    commit, date, machine load, Kubernetes release and settings it ran with; then every FP/FN case
    (seed, family, placement, verdict, bound). Pure."""
    out = ["<!-- Generated from docs/results/differential/*.json by `python -m tests.e2e.differential "
           "--report`; do not edit. -->\n\n# Differential runs: the planner against the real kube-scheduler\n\n",
           "How the runs work and what TP/TN/FP/FN mean: [../differential.md](../differential.md). Each row comes "
           "from the results file named in it, which holds every run (and the API snapshot of every FP/FN "
           "case, for `--replay`).\n\n",
           "| results file | family | seeds | placement | scenarios | TP | TN | **FP** | FN | commit | date | "
           "load (1/5/15 min) at start | Kubernetes | command |\n", "|" + "---|" * 14 + "\n"]
    for name, doc in sorted(docs.items()):
        run = doc.get("run") or {}
        st = run.get("settings") or {}
        load = " / ".join(str(x) for x in run.get("load_average", [])) or "?"
        for placement, c in sorted((doc.get("summary") or {}).items()):
            out.append(f"| [{name}](differential/{name}) | {st.get('family', '?')} | {st.get('seeds', '?')} | "
                       f"{placement} | {c['scenarios']} | {c['TP']} | {c['TN']} | **{c['FP']}** | {c['FN']} | "
                       f"{run.get('commit', '?')} | {run.get('date', '?')} | {load} | {st.get('kubernetes', '?')} | "
                       f"`{doc.get('command', '')}` (stable {st.get('stable', '?')} s, "
                       f"{doc.get('elapsed_seconds', '?')} s in all) |\n")
    cases = [(name, c) for name, doc in sorted(docs.items()) for c in doc.get("cases") or []]
    out.append("\n## False positives and false negatives\n\n")
    if not cases:
        out.append("None.\n")
    else:
        out.append("| results file | seed | family | placement | class | planner | minMember | bound |\n"
                   "|---|---|---|---|---|---|---|---|\n")
        for name, c in cases:
            out.append(f"| {name} | {c.get('seed')} | {c.get('family')} | {c.get('placement')} | "
                       f"{c.get('classification')} | {c.get('verdict')} | {c.get('min_member')} | "
                       f"{len(c.get('bound') or {})}/{c.get('members')} |\n")
    return "".join(out)


def _report_main(root: str) -> int:
    import glob

    docs = {os.path.basename(f): json.load(open(f)) for f in sorted(glob.glob(os.path.join(root, RESULTS_DIR, "*.json")))}
    with open(os.path.join(root, RESULTS_PAGE), "w") as fh:
        fh.write(report(docs))
    print(f"wrote {RESULTS_PAGE} from {len(docs)} results files")
    return 0


def _server_version(api: Any) -> str:
    from kubernetes import client

    try:
        return client.VersionApi(api).get_code().git_version
    except Exception:  # noqa: BLE001 - recorded as unknown
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m tests.e2e.differential", description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=12, help="scenarios (seeds seed .. seed+count-1)")
    ap.add_argument("--seed", type=int, default=0, help="first seed")
    ap.add_argument("--seeds", type=str, default="", help="comma-separated seeds (overrides --count/--seed)")
    ap.add_argument("--placement", choices=(*PLACEMENTS, "both"), default="both")
    ap.add_argument("--family", choices=("mixed", "tight", "devices"), default="mixed",
                    help="scenario generator family")
    ap.add_argument("--out", default="differential-results.json")
    ap.add_argument("--kubeconfig", help="use this cluster (else start a local control plane)")
    ap.add_argument("--stable", type=float, default=2.0, help="seconds the outcome must not change")
    ap.add_argument("--settle-timeout", type=float, default=15.0)
    ap.add_argument("--report", action="store_true",
                    help=f"write {RESULTS_PAGE} from the results files in {RESULTS_DIR} (runs nothing)")
    args = ap.parse_args(argv)
    if args.report:
        return _report_main(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    seeds = [int(s) for s in args.seeds.split(",") if s] if args.seeds else list(range(args.seed, args.seed + args.count))
    modes = PLACEMENTS if args.placement == "both" else (args.placement,)

    cluster = None
    if args.kubeconfig:
        from kubernetes import config

        api = config.new_client_from_config(config_file=args.kubeconfig)
    else:
        from cogate.localcluster.cluster import LocalCluster

        cluster = LocalCluster()
        cluster.start()
        api = cluster.api_client()
    started = time.monotonic()
    outcomes: list[Outcome] = []
    facts = run_facts({"family": args.family, "seeds": f"{seeds[0]}-{seeds[-1]}" if seeds else "",
                       "placement": args.placement, "stable": args.stable, "settle_timeout": args.settle_timeout,
                       "kubernetes": _server_version(api)})
    try:
        runner = Runner(api, stable=args.stable, settle_timeout=args.settle_timeout)
        for seed in seeds:
            sc = generate(seed, args.family)
            for mode in modes:
                o = runner.run(sc, mode)
                outcomes.append(o)
                print(f"seed {seed} {args.family} {mode}: {o.verdict} fits={o.fits} "
                      f"min={o.min_member} bound={len(o.bound)}/{o.members} -> {o.classification} "
                      f"({o.seconds}s)", flush=True)
            _write(args.out, argv, outcomes, started, dict(facts, load_average_now=[
                round(x, 1) for x in os.getloadavg()]))
        runner.delete_fake_nodes()
    finally:
        api.close()
        if cluster is not None:
            cluster.stop()
    print(json.dumps(summarize(outcomes), indent=1))
    return 1 if any(o.classification == "FP" and o.placement == "pinned" for o in outcomes) else 0


if __name__ == "__main__":
    raise SystemExit(main())
