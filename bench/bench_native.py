"""Issue 18 item 4: side by side with Kubernetes' own gang scheduling.

kube-scheduler 1.37 schedules gangs itself (KEP-4671, beta, feature gate ``GenericWorkload``,
off by default): a ``scheduling.k8s.io/v1beta1`` PodGroup with
``spec.schedulingPolicy.gang.minCount``, pods naming it in ``spec.schedulingGroup.podGroupName``,
one scheduling cycle per group and workload-aware preemption (KEP-5710). This benchmark runs
the same workloads through both, each on its own v1.37.2 control plane with ``GenericWorkload``
on (one after the other, same kwok node shapes, same pods, same scheduler configuration):

- **cogate**: its CRD, webhook and controller (``--preemption``); the gang is cogate's PodGroup
  (created first) and its members carry the group label;
- **native**: no cogate; the gang is a ``scheduling.k8s.io/v1beta1`` PodGroup (created first, its
  ``priorityClassName`` the members' class) and the members' pod template sets
  ``spec.schedulingGroup.podGroupName`` (they carry the same label, which nothing reads there,
  so one pod watch groups both).

Workloads (ReplicaSets; pods 100m/64Mi unless said; the PodGroups first, then every ReplicaSet
of every group at once, except that a group's ReplicaSets are created in the order listed):

- README example: 1 node (10 CPU, 8Gi); 6 pods of 3 CPU / 500Mi; minMember 3 (3 can run) and
  minMember 4 (none can run; watched 15 s);
- two groups competing: 2 nodes of 4 CPU; groups A and B of 6 pods of 1 CPU, minMember 6: room
  for one of them; watched 20 s after the winner is bound;
- 100 groups of 8 and one group of 1,000 on 100 nodes (4 CPU, 16Gi);
- heterogeneous members: one group of 12 executors (1 CPU / 1Gi, created first, as the MPI
  operator creates workers before their launcher) and a driver (2 CPU / 2Gi), minMember 13, on 4
  nodes of 4 CPU: room for all 13 only if the driver's node keeps 2 CPU free (spread evenly, the
  executors leave 1 CPU on every node), the case native calls best effort;
- preemption: 10 nodes of 4 CPU full of low-priority pods (PriorityClass ``low``, 500m), then a
  gang of 8 high-priority members of 1 CPU (class ``high``) that fits once 16 of them go.

Per workload: **time** from the first create call until the pod watch sees the expected pods
bound (ratio cogate / native); whether any group was **partly bound** (the rule of
:func:`bench_coscheduling.quorum`: at some moment 0 < bound < minMember and then still below it
at the end, or reaching it only more than 5 s + minMember / 50 s after its first binding); what
each **said** about a group that did not reach minMember (cogate: its PodGroup's ``Released``
condition; native: its PodGroup's conditions and a pending member's ``PodScheduled`` condition);
**API requests per pod**: every request kube-apiserver answered during the workload
(``apiserver_request_total``, all clients: the systems, the ReplicaSet controller, kwok and
this watch) divided by the pods created for it, and the writes to pods and PodGroups per pod;
the **timeline** of each (:func:`timeline`: pods created, gates removed, bindings, members deleted
and made again) and the load average at the start and end of each workload.

A missed target is explained from this run's figures (the report's explanations): a time ratio by
the two timelines, the difference split into the pods' creation and what follows it (:func:`explain_time`); a cogate group counted as partly bound only when it was
slow to minMember with every member released and none deleted or made again, by its release's
span and kube-scheduler's binding pace (:func:`explain_partly`). A group stranded below minMember,
or a member deleted and made again (issue 29: a node briefly NotReady under load made cogate
recreate 43 members of the released gang of 1,000), is never explained: the run is refused.

    python bench/bench_native.py [--quick]       # prints RESULT <json>
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_coscheduling as cos  # noqa: E402
import clusterbench as cb  # noqa: E402
from bench_preemption_cluster import parse_cpu_millis  # noqa: E402

from cogate.api import GROUP, PLURAL, VERSION  # noqa: E402

NAME = "native"
TITLE = "Side by side with Kubernetes' own gang scheduling (1.37.2, GenericWorkload on)"
NEEDS_CLUSTER = True
RELEASE = "1.37.2"
GATES = {"GenericWorkload": True}
NATIVE_GROUP, NATIVE_VERSION, NATIVE_PLURAL = "scheduling.k8s.io", "v1beta1", "podgroups"
TARGET = 1.1  # cogate's time within 1.1x of native's (issue 18)
SYSTEMS = ("cogate", "native")
LOW = ("low", 100)
HIGH = ("high", 1000)
LOW_CPU = "500m"
README_NODE = {"cpu": "10", "memory": "8Gi", "pods": 110}
NODE_4CPU = {"cpu": "4", "memory": "16Gi", "pods": 110}


@dataclass(frozen=True)
class Part:
    """One ReplicaSet of a group: ``replicas`` pods requesting (= limited to) ``cpu``/``memory``."""

    name: str
    replicas: int
    cpu: str = "100m"
    memory: str = "64Mi"


@dataclass(frozen=True)
class Group:
    name: str
    min_member: int
    parts: tuple[Part, ...]

    @property
    def size(self) -> int:
        return sum(p.replicas for p in self.parts)


@dataclass(frozen=True)
class Workload:
    label: str
    node_count: int
    node_shape: dict[str, Any]
    groups: tuple[Group, ...]
    expect_bound: int
    hold_s: float = 2.0  # keep watching after the expected count is bound (or from the start when 0)
    fill_low: bool = False  # nodes first filled with low-priority pods of LOW_CPU; members are HIGH

    @property
    def pods(self) -> int:
        return sum(g.size for g in self.groups)


def _one(name: str, n: int, min_member: int, cpu: str = "100m", memory: str = "64Mi") -> Group:
    return Group(name, min_member, (Part(name, n, cpu, memory),))


def workloads(quick: bool) -> list[Workload]:
    hetero = Group("spark", 13, (Part("executor", 12, "1", "1Gi"), Part("driver", 1, "2", "2Gi")))
    out = [
        Workload("README example, minMember 3", 1, README_NODE, (_one("nginx", 6, 3, "3", "500Mi"),), 3, 5.0),
        Workload("README example, minMember 4", 1, README_NODE, (_one("nginx", 6, 4, "3", "500Mi"),), 0,
                 5.0 if quick else 15.0),
        Workload("two groups competing for room for one", 2, NODE_4CPU,
                 (_one("a", 6, 6, "1", "1Gi"), _one("b", 6, 6, "1", "1Gi")), 6, 5.0 if quick else 20.0),
        Workload("heterogeneous: 12 executors then a driver", 4, NODE_4CPU, (hetero,), 13, 5.0 if quick else 15.0),
        Workload("high-priority gang of 8 on a full cluster", 10, NODE_4CPU, (_one("g", 8, 8, "1"),), 8, 3.0,
                 fill_low=True),
    ]
    if quick:
        out += [Workload("2 groups of 4", 10, NODE_4CPU, tuple(_one(f"g{i}", 4, 4) for i in range(2)), 8),
                Workload("1 group of 8", 10, NODE_4CPU, (_one("big", 8, 8),), 8)]
    else:
        out += [Workload("100 groups of 8", 100, NODE_4CPU, tuple(_one(f"g{i}", 8, 8) for i in range(100)), 800),
                Workload("1 group of 1,000", 100, NODE_4CPU, (_one("big", 1000, 1000),), 1000)]
    return out


# ------------------------------------------------------------------ manifests

def native_pod_group(g: Group, priority_class: str | None) -> dict[str, Any]:
    """The ``scheduling.k8s.io/v1beta1`` PodGroup of ``g`` (gang of ``minCount`` = minMember)."""
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": g.min_member}}}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": f"{NATIVE_GROUP}/{NATIVE_VERSION}", "kind": "PodGroup", "metadata": {"name": g.name},
            "spec": spec}


def replica_set(system: str, g: Group, part: Part, priority_class: str | None) -> dict[str, Any]:
    """The ReplicaSet of ``part``: cogate's members carry the group label (the webhook gates them);
    native's carry it too (nothing reads it there) and name the native PodGroup."""
    body = cb.replica_set(f"{g.name}-{part.name}" if part.name != g.name else g.name, part.replicas, group=g.name,
                          cpu=part.cpu, memory=part.memory, priority_class=priority_class)
    if system == "native":
        body["spec"]["template"]["spec"]["schedulingGroup"] = {"podGroupName": g.name}
    return body


# ------------------------------------------------------------------ what each said

def _conditions(obj: dict[str, Any], only: str | None = None) -> str:
    return "; ".join(f"{c.get('type')}={c.get('status')} {c.get('reason') or ''}: {(c.get('message') or '')[:240]}"
                     for c in (obj.get("status") or {}).get("conditions") or [] if only in (None, c.get("type")))


def said(api: client.ApiClient, system: str, ns: str, name: str) -> str:
    """What ``system`` says about group ``name`` in ``ns``, in words (module doc)."""
    custom = client.CustomObjectsApi(api)
    try:
        if system == "cogate":
            obj = custom.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name)
            return _conditions(obj, "Released") or "(no Released condition)"
        obj = custom.get_namespaced_custom_object(NATIVE_GROUP, NATIVE_VERSION, ns, NATIVE_PLURAL, name)
    except client.ApiException as exc:
        return f"(PodGroup not read: HTTP {exc.status})"
    text = _conditions(obj) or "PodGroup: no conditions"
    pods = client.CoreV1Api(api).list_namespaced_pod(ns, label_selector=f"{cb.POD_GROUP_LABEL}={name}").items
    for p in pods:
        if not p.spec.node_name:
            cond = next((c for c in p.status.conditions or [] if c.type == "PodScheduled"), None)
            text += (f"; pod {p.metadata.name}: PodScheduled={cond.status} {cond.reason or ''}: "
                     f"{(cond.message or '')[:240]}" if cond else f"; pod {p.metadata.name}: no PodScheduled condition")
            break
    return text


# ------------------------------------------------------------------ one workload

def run_workload(cluster: Any, api: client.ApiClient, watch: cb.PodWatch, w: Workload, system: str,
                 timeout: float) -> dict[str, Any]:
    cb.set_nodes(cluster, w.node_count, **w.node_shape)
    ns = cb.new_namespace(api, system[:3])
    ns_low = cb.new_namespace(api, f"{system[:3]}-low") if w.fill_low else None
    prio = HIGH[0] if w.fill_low else None
    try:
        if ns_low:
            low = w.node_count * (parse_cpu_millis(w.node_shape["cpu"]) // parse_cpu_millis(LOW_CPU))
            cb.create_replica_set(api, ns_low, cb.replica_set("low", low, group=None, cpu=LOW_CPU,
                                                              priority_class=LOW[0]))
            watch.wait_bound(ns_low, low, timeout)
        for g in w.groups:
            if system == "cogate":
                cb.create_pod_group(api, ns, cb.pod_group(g.name, g.min_member))
            else:
                client.CustomObjectsApi(api).create_namespaced_custom_object(
                    NATIVE_GROUP, NATIVE_VERSION, ns, NATIVE_PLURAL, native_pod_group(g, prio), _preload_content=False)
        before = cb.apiserver_requests(api)
        load = round(os.getloadavg()[0], 1)
        t0 = time.monotonic()

        def create(g: Group) -> None:
            for part in g.parts:  # in order: e.g. the executors before their driver
                cb.create_replica_set(api, ns, replica_set(system, g, part, prio))
        cb.parallel(create, w.groups)
        reached = None
        if w.expect_bound:
            try:
                reached = watch.wait_bound(ns, w.expect_bound, timeout) - t0
            except TimeoutError:
                reached = None
        time.sleep(w.hold_s)
        end = time.monotonic()
        requests = {k: v - before.get(k, 0.0) for k, v in cb.apiserver_requests(api).items()}
        writes = cb.pod_writes(requests)
        out = cos.partial_binding(watch, ns, _as_cos(w), end)
        out["time s"] = round(reached, 2) if reached is not None else None
        out["timed out"] = bool(w.expect_bound) and reached is None
        out["over-bound"] = out["bound"] > w.expect_bound
        out["requests per pod"] = round(sum(v for v in requests.values() if v > 0) / w.pods, 1)
        out["pod and PodGroup writes per pod"] = round(sum(writes.values()) / w.pods, 2)
        out["writes"] = {k: int(v) for k, v in writes.items()}
        out["timeline"] = timeline(watch, ns, t0, end)
        out["load"] = [load, round(os.getloadavg()[0], 1)]
        with watch.lock:
            bound = {}
            for t, n, _, grp in watch.bind_log:
                if n == ns and t <= end:
                    bound[grp] = bound.get(grp, 0) + 1
        out["said"] = {g.name: said(api, system, ns, g.name) for g in w.groups if bound.get(g.name, 0) < g.min_member}
        if ns_low:
            with watch.lock:
                out["victims"] = sum(1 for (n, _), r in watch.records.items()
                                     if n == ns_low and r.deleted is not None and t0 <= r.deleted <= end)
        return out
    finally:
        cb.delete_namespace(api, ns)
        if ns_low:
            cb.delete_namespace(api, ns_low)


def timeline(watch: cb.PodWatch, ns: str, t0: float, end: float) -> dict[str, Any]:
    """What the pod watch saw of namespace ``ns`` from ``t0`` (the first create call) to ``end``, in
    seconds from ``t0`` (None when nothing of the kind happened): when the last pod was created, the
    first and last gate removed (cogate's release), the first and last binding; and how many pods were
    created and how many of them were deleted before ``end`` (a member deleted and made again by its
    ReplicaSet shows as one pod more than the workload asked for)."""
    with watch.lock:
        recs = [r for (n, _), r in watch.records.items() if n == ns and t0 - 1.0 <= r.created <= end]

    def span(times: list[float]) -> tuple[float | None, float | None]:
        return (round(min(times) - t0, 2), round(max(times) - t0, 2)) if times else (None, None)
    ungated = span([r.ungated for r in recs if r.gated_at_creation and r.ungated is not None and r.ungated <= end])
    bound = span([r.bound for r in recs if r.bound is not None and r.bound <= end])
    deleted = [r for r in recs if r.deleted is not None and r.deleted <= end]
    return {"pods created": len(recs), "deleted": len(deleted),
            "deleted after binding": sum(1 for r in deleted if r.bound is not None),
            "last created s": span([r.created for r in recs])[1], "first gate removed s": ungated[0],
            "last gate removed s": ungated[1], "first bound s": bound[0], "last bound s": bound[1]}


def _rate(n: int, seconds: float | None) -> str:
    return f"{n / seconds:.0f}/s" if seconds and seconds > 0 else "?/s"


def explain_time(w: Workload, a: dict[str, Any], b: dict[str, Any]) -> str:
    """Why cogate's time missed the target (``a``: cogate's result, ``b``: native's), from this run's
    timelines: the difference split into the pods' creation (until the last pod existed) and what
    came after it (cogate: the rest of the release, then kube-scheduler's binding; native: its
    binding), the load, and any member deleted and made again."""
    ta, tb = a["timeline"], b["timeline"]
    n = w.expect_bound
    created_a, created_b = ta["last created s"] or 0.0, tb["last created s"] or 0.0
    after_a, after_b = (ta["last bound s"] or 0.0) - created_a, (tb["last bound s"] or 0.0) - created_b
    release_tail = (ta["last gate removed s"] or 0.0) - created_a
    gates = (ta["last gate removed s"] or 0.0) - (ta["first gate removed s"] or 0.0)
    creation, after = created_a - created_b, after_a - after_b
    larger = ("the pods' creation (the ReplicaSet controller's creates, each through cogate's admission webhook)"
              if creation >= after else "what follows the last creation")
    text = (f"Of the {(ta['last bound s'] or 0.0) - (tb['last bound s'] or 0.0):.1f} s more, {creation:.1f} s is the "
            f"pods' creation (all {ta['pods created']:,} existed at {created_a:.2f} s with cogate, at {created_b:.2f} s "
            f"native) and {after:.1f} s what follows it (cogate: the last gate removed {release_tail:.2f} s and the "
            f"last member bound {after_a:.2f} s after the last creation; native: the last pod bound {after_b:.2f} s "
            f"after it, one scheduling cycle per group): the larger part is {larger}. cogate's gates went from "
            f"{ta['first gate removed s']} s to {ta['last gate removed s']} s ({_rate(n, gates)})"
            f"{', each group released once complete' if len(w.groups) > 1 else ''}. Load average (1 min) at the start of the workload: cogate {a['load'][0]}, native "
            f"{b['load'][0]} on 2 cores.")
    if ta["deleted"]:
        text += (f" {ta['deleted']} members were deleted during the run ({ta['deleted after binding']} of them "
                 "after binding) and made again by their ReplicaSet.")
    return text


def explain_partly(w: Workload, a: dict[str, Any], b: dict[str, Any]) -> str:
    """Why a cogate group counted as partly bound is not a partial release, when the figures say so:
    only groups slow to minMember (none stranded), the expected members bound (none more: no loser
    bound) and no pod deleted or made again; then the lag is the release's gate removals plus kube-scheduler's
    binding, in figures. '' otherwise (the miss stands unexplained and the run is refused)."""
    ta = a["timeline"]
    if a["stranded"] or ta["deleted"] or ta["pods created"] != w.pods or a["bound"] != w.expect_bound:
        return ""
    gates = (ta["last gate removed s"] or 0.0) - (ta["first gate removed s"] or 0.0)
    binds = (ta["last bound s"] or 0.0) - (ta["first bound s"] or 0.0)
    n = w.expect_bound
    during = (", the first while the release was still under way"
              if (ta["first bound s"] or 0.0) < (ta["last gate removed s"] or 0.0) else "")
    return (f"{w.label}: released whole, not partly: {cos.partly(a)} is the time from the first member bound to "
            f"the last; the {n:,} members were released (gates removed from {ta['first gate removed s']} s to "
            f"{ta['last gate removed s']} s, {gates:.1f} s at {_rate(n, gates)}) and none was deleted or made again "
            f"({ta['pods created']:,} pods created); kube-scheduler bound them "
            f"from {ta['first bound s']} s to {ta['last bound s']} s ({_rate(n, binds)}, load {a['load'][0]} at "
            f"the start){during}; native's group: {b['max quorum lag s']} s from first to last binding.")


def _as_cos(w: Workload) -> cos.Workload:
    """``w`` in the shape :func:`bench_coscheduling.partial_binding` reads (groups and minMember)."""
    return cos.Workload(w.label, w.node_count, w.node_shape, [(g.name, g.size, g.min_member) for g in w.groups])


# ------------------------------------------------------------------ the benchmark

def _system(system: str, quick: bool, timeout: float) -> dict[str, dict[str, Any]]:
    with cb.control_plane(kubernetes_version=RELEASE, feature_gates=GATES) as c:
        versions = c.kubectl("api-versions").stdout.split()
        if f"{NATIVE_GROUP}/{NATIVE_VERSION}" not in versions:
            raise RuntimeError(f"{RELEASE} with {GATES} does not serve {NATIVE_GROUP}/{NATIVE_VERSION}")
        with cb.cogate_stack(c, "--preemption") if system == "cogate" else contextlib.nullcontext():
            api = cb.api_client(c)
            for name, value in (LOW, HIGH):
                cb.priority_class(api, name, value)
            out = cb.run_workloads(api, NAME, system, workloads(quick),
                                   lambda watch, w: run_workload(c, api, watch, w, system, timeout))
            api.close()
    return out


def run(quick: bool, out_dir: Path) -> dict[str, Any]:
    timeout = 60 if quick else 600
    res = {s: _system(s, quick, timeout) for s in SYSTEMS}
    rows, said_rows, targets = [], [], []
    for w in workloads(quick):
        a, b = res["cogate"][w.label], res["native"][w.label]
        r = cb.ratio(a["time s"], b["time s"]) if a["time s"] and b["time s"] else None
        rows.append([w.label, w.expect_bound, a["time s"], b["time s"], r, a["bound"], b["bound"], cos.partly(a),
                     cos.partly(b), a["timeline"]["deleted"], a["requests per pod"], b["requests per pod"],
                     a["pod and PodGroup writes per pod"], b["pod and PodGroup writes per pod"],
                     f"{a['load'][0]} / {b['load'][0]}"])
        for g in sorted(set(a["said"]) | set(b["said"])):
            said_rows.append([w.label, g, a["said"].get(g, "(reached minMember)"),
                              b["said"].get(g, "(reached minMember)")])
        if r is not None and w.expect_bound >= 100:
            targets.append(cb.target(f"time until all bound, {w.label}", f"cogate <= {TARGET}x native",
                                     f"{r}x ({a['time s']} s vs {b['time s']} s; load {a['load'][0]} / "
                                     f"{b['load'][0]})", r <= TARGET, explain_time(w, a, b)))
    partly = [f"{s}: {w.label}: {cos.partly(res[s][w.label])}" for s in SYSTEMS for w in workloads(quick)
              if cos.partly(res[s][w.label]) != "no"]
    cogate_partly = [w for w in workloads(quick) if cos.partly(res["cogate"][w.label]) != "no"]
    why = [explain_partly(w, res["cogate"][w.label], res["native"][w.label]) for w in cogate_partly]
    targets.append(cb.target("a group partly bound, any workload", "never (cogate)",
                             "; ".join(p for p in partly if p.startswith("cogate")) or "never",
                             not cogate_partly, " ".join(why) if why and all(why) else ""))
    notes = [f"Both systems on v{RELEASE} control planes with feature gate GenericWorkload=true (the native API "
             f"{NATIVE_GROUP}/{NATIVE_VERSION} served), one after the other, same kwok node shapes and pods. cogate "
             "with its defaults plus --preemption (placement pinned); native with kube-scheduler's default "
             "configuration (its GangScheduling plugins on with the gate).",
             "Load average (1 min) at the start and end of each workload, cogate / native: "
             + "; ".join(f"{w.label}: {res['cogate'][w.label]['load']} / {res['native'][w.label]['load']}"
                         for w in workloads(quick)) + ".",
             "Requests per pod count every client of the API server during the workload (from the first create call "
             "to the end of the watch), divided by the pods created for it: the low-priority fill and its nodes are "
             "before the count starts.",
             "raw figures: " + json.dumps(res)]
    return cb.result(
        NAME, TITLE,
        "The same workloads (README example, two groups competing for room for one, heterogeneous members, a "
        "high-priority gang on a full cluster, 100 groups of 8, one group of 1,000) through cogate and through "
        "kube-scheduler's own gang scheduling (scheduling.k8s.io/v1beta1 PodGroups), each on its own v1.37.2 "
        "control plane with GenericWorkload on. Time from the first create call until a pod watch sees the "
        "expected pods bound; partial binding; what each said about a group that did not start; API requests "
        "per pod.",
        "native gang scheduling, same workloads, same machine, same run (ratio cogate / native).",
        tables=[cb.table("Time until the expected pods are bound, partial binding, API requests",
                         ["workload", "expected bound", "cogate s", "native s", "ratio", "cogate bound", "native bound",
                          "cogate partly bound", "native partly bound", "cogate members deleted during the run",
                          "cogate requests/pod", "native requests/pod", "cogate pod+group writes/pod",
                          "native pod+group writes/pod", "load at start, cogate / native"], rows),
                cb.table("What each said about a group below minMember at the end",
                         ["workload", "group", "cogate", "native"], said_rows)],
        targets=targets, notes=notes)


if __name__ == "__main__":
    cb.main(run)
