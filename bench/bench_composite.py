"""Issue 33: gangs with roles and gangs of gangs, side by side with Kubernetes' CompositePodGroup.

kube-scheduler 1.37 admits a set of gangs itself (KEP-6012, alpha, feature gate
``CompositePodGroup``, which needs ``GenericWorkload`` and ``TopologyAwareWorkloadScheduling``:
k8s.io/kubernetes pkg/features/kube_features.go): a ``scheduling.k8s.io/v1alpha3``
CompositePodGroup with ``spec.schedulingPolicy.gang.minGroupCount`` whose children are PodGroups
naming it in ``spec.parentCompositePodGroupName`` (each a gang of ``minCount``), pods naming their
PodGroup in ``spec.schedulingGroup.podGroupName``. This benchmark runs the shapes of issue 33
through both, each on its own v1.37.2 control plane with those three gates on and
``scheduling.k8s.io/v1alpha3`` served (one after the other, same kwok nodes, same pods):

- **cogate**: its PodGroups (created first), a set as ``cogate.dev/gang-set`` on each of its
  groups (``cogate.dev/gang-set-minimum`` for k of n), roles as ``cogate.dev/role-minimums`` with
  ``cogate.dev/role-label: role``; members carry the group label (the webhook gates them);
- **native**: no cogate; a set is a CompositePodGroup (``minGroupCount`` = the set's minimum)
  with one child PodGroup per group (``minCount`` = minMember); roles are what native offers
  for them: one child PodGroup per role (``minCount`` = the role's minimum) under a
  CompositePodGroup needing every child.

Shapes (bare pods, memory 64Mi; the groups first, then every pod at once):

- **ps + workers, only ps fits**: 1 node of 4 CPU; ps (2 pods of 1 CPU, minimum 2) and workers
  (4 pods of 2 CPU, minimum 4), a set of both;
- **two sets competing for one room**: 1 node of 4 CPU; sets A (a1, a2) and B (b1, b2), each
  group 2 pods of 1 CPU, minimum 2: room for one set;
- **KEP-6012's stealing shape**: 1 node of 4 CPU; a set of c1 (4 pods of 1 CPU, minimum 2) and
  c2 (2 pods of 1 CPU, minimum 2), c1's pods created first: room for 4;
- **a role-short RayCluster-like gang**: 1 node of 10 CPU and one ``nvidia.com/gpu``; a head
  (1 CPU), 4 CPU workers (1 CPU) and 2 GPU workers (1 CPU, 1 GPU); role minimums head 1, cpu 2,
  gpu 2 (cogate: one PodGroup, minMember 5; native: three children under one composite).

Per shape and system, after the pods were created and ``HOLD`` seconds passed: the pods bound per
group (or role), whether a set or gang ran below its minimum (``partly``: a group with
0 < bound < its minimum, or a set with fewer groups at their minimum than its own minimum but
one of them bound), and what each said about a group that did not start (cogate: its
PodGroup's ``Released`` condition; native: the first pending member's ``PodScheduled``).

    python bench/bench_composite.py [--quick]       # prints RESULT <json>
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

sys.path.insert(0, str(Path(__file__).resolve().parent))
import clusterbench as cb  # noqa: E402

from cogate.api import GROUP, PLURAL, VERSION  # noqa: E402

NAME = "composite"
TITLE = "Roles and sets of gangs beside Kubernetes' CompositePodGroup (1.37.2, CompositePodGroup on)"
NEEDS_CLUSTER = True
RELEASE = "1.37.2"
GATES = {"GenericWorkload": True, "TopologyAwareWorkloadScheduling": True, "CompositePodGroup": True}
NATIVE_GROUP, NATIVE_VERSION = "scheduling.k8s.io", "v1alpha3"
SYSTEMS = ("cogate", "native")
GPU = "nvidia.com/gpu"
ROLE_LABEL = "role"
PART_LABEL = "bench-part"


@dataclass(frozen=True)
class Part:
    """``n`` pods of a group (``role``: their role label, '' none) requesting ``cpu`` (and ``gpu``)."""

    group: str
    n: int
    cpu: str
    role: str = ""
    gpu: int = 0


@dataclass(frozen=True)
class Shape:
    label: str
    node: dict[str, Any]
    parts: tuple[Part, ...]
    minimums: dict[str, int]  # group -> minMember (cogate), minCount (native)
    sets: tuple[tuple[str, tuple[str, ...], int], ...] = ()  # (set name, its groups, groups needed)
    roles: dict[str, int] | None = None  # one cogate group with role minimums; native: a child per role
    expected: str = ""  # what issue 33 asks of cogate

    def groups(self) -> list[str]:
        return list(dict.fromkeys(p.group for p in self.parts))


NODE4 = {"cpu": "4", "memory": "16Gi", "pods": 110}
RAY_NODE = {"cpu": "10", "memory": "16Gi", "pods": 110, "extended": {GPU: 1}}


def shapes() -> list[Shape]:
    return [
        Shape("ps + workers, only ps fits", NODE4,
              (Part("ps", 2, "1"), Part("workers", 4, "2")), {"ps": 2, "workers": 4},
              sets=(("job", ("ps", "workers"), 2),), expected="neither group runs"),
        Shape("two sets competing for one room", NODE4,
              (Part("a1", 2, "1"), Part("a2", 2, "1"), Part("b1", 2, "1"), Part("b2", 2, "1")),
              {"a1": 2, "a2": 2, "b1": 2, "b2": 2},
              sets=(("a", ("a1", "a2"), 2), ("b", ("b1", "b2"), 2)), expected="one set runs whole, the other waits"),
        Shape("KEP-6012 stealing: c1 4 pods min 2, c2 2 pods min 2, room for 4", NODE4,
              (Part("c1", 4, "1"), Part("c2", 2, "1")), {"c1": 2, "c2": 2},
              sets=(("c", ("c1", "c2"), 2),), expected="2 + 2"),
        Shape("RayCluster-like, GPU role short: head 1, cpu 4 (min 2), gpu 2 (min 2), 1 GPU", RAY_NODE,
              (Part("ray", 1, "1", "head"), Part("ray", 4, "1", "cpu"), Part("ray", 2, "1", "gpu", gpu=1)),
              {"ray": 5}, roles={"head": 1, "cpu": 2, "gpu": 2}, expected="nothing runs, role gpu named"),
    ]


# ------------------------------------------------------------------ manifests

def _part_key(p: Part, roles: bool) -> str:
    """The unit a pod is counted in: its role in a gang with roles, else its group."""
    return p.role if roles and p.role else p.group


def cogate_groups(s: Shape) -> list[dict[str, Any]]:
    """cogate's PodGroups of ``s`` with their set and role annotations."""
    out = []
    for g in s.groups():
        body = cb.pod_group(g, s.minimums[g])
        ann: dict[str, str] = {}
        for _, members, k in (x for x in s.sets if g in x[1]):
            ann["cogate.dev/gang-set"] = json.dumps(list(members))
            if k < len(members):
                ann["cogate.dev/gang-set-minimum"] = str(k)
        if s.roles is not None:
            ann["cogate.dev/role-minimums"] = json.dumps(s.roles)
            ann["cogate.dev/role-label"] = ROLE_LABEL
        if ann:
            body["metadata"]["annotations"] = ann
        out.append(body)
    return out


def native_objects(s: Shape) -> list[tuple[str, dict[str, Any]]]:
    """``(plural, body)`` of native's CompositePodGroups (first) and PodGroups for ``s``."""
    def ref(workload: str, template: str) -> dict[str, str]:
        return {"workloadName": workload, "templateName": template}

    def composite(name: str, k: int) -> tuple[str, dict[str, Any]]:
        return "compositepodgroups", {
            "apiVersion": f"{NATIVE_GROUP}/{NATIVE_VERSION}", "kind": "CompositePodGroup", "metadata": {"name": name},
            "spec": {"workloadRef": ref(name, name), "schedulingPolicy": {"gang": {"minGroupCount": k}}}}

    def child(name: str, n: int, parent: str | None) -> tuple[str, dict[str, Any]]:
        spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": n}}}
        if parent:
            spec |= {"parentCompositePodGroupName": parent, "workloadRef": ref(parent, name)}
        return "podgroups", {"apiVersion": f"{NATIVE_GROUP}/{NATIVE_VERSION}", "kind": "PodGroup",
                             "metadata": {"name": name}, "spec": spec}

    if s.roles is not None:  # one child per role under a composite needing them all
        (g,) = s.groups()
        return [composite(g, len(s.roles))] + [child(f"{g}-{r}", n, g) for r, n in s.roles.items()]
    out, parent = [], {}
    for name, members, k in s.sets:
        out.append(composite(name, k))
        parent |= {m: name for m in members}
    return out + [child(g, s.minimums[g], parent.get(g)) for g in s.groups()]


def pods(system: str, s: Shape) -> list[dict[str, Any]]:
    """Every pod of ``s``, in creation order (parts as listed)."""
    out = []
    for p in s.parts:
        key = _part_key(p, s.roles is not None)
        for i in range(p.n):
            labels = {PART_LABEL: key} | ({ROLE_LABEL: p.role} if p.role else {})
            body = cb.pod(f"{key}-{i}", group=p.group if system == "cogate" else None, cpu=p.cpu, labels=labels)
            c = body["spec"]["containers"][0]["resources"]
            if p.gpu:
                c["requests"][GPU] = c["limits"][GPU] = str(p.gpu)
            if system == "native":
                native_group = f"{p.group}-{p.role}" if s.roles is not None else p.group
                body["spec"]["schedulingGroup"] = {"podGroupName": native_group}
            out.append(body)
    return out


# ------------------------------------------------------------------ what each said

def said(api: client.ApiClient, system: str, ns: str, unit: str, s: Shape) -> str:
    """Why ``unit`` (a group, or a role of the one gang with roles) did not start, in ``system``'s words."""
    if system == "cogate":
        group = s.groups()[0] if s.roles is not None else unit
        try:
            obj = client.CustomObjectsApi(api).get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, group)
        except client.ApiException as exc:
            return f"(PodGroup not read: HTTP {exc.status})"
        c = next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == "Released"), None)
        return f"Released={c['status']} {c['reason']}: {c['message'][:300]}" if c else "(no Released condition)"
    for p in client.CoreV1Api(api).list_namespaced_pod(ns, label_selector=f"{PART_LABEL}={unit}").items:
        if not p.spec.node_name:
            c = next((c for c in p.status.conditions or [] if c.type == "PodScheduled"), None)
            return (f"pod {p.metadata.name}: PodScheduled={c.status} {c.reason or ''}: {(c.message or '')[:300]}"
                    if c else f"pod {p.metadata.name}: no PodScheduled condition")
    return "(all bound)"


def partly(s: Shape, bound: dict[str, int]) -> list[str]:
    """Gangs and sets that run below their minimum (module doc)."""
    out = []
    units = dict(s.roles) if s.roles is not None else dict(s.minimums)
    for u, n in units.items():
        if 0 < bound.get(u, 0) < n:
            out.append(f"{u} {bound[u]} of {n}")
    if s.roles is not None and any(bound.values()) and any(bound.get(u, 0) < n for u, n in units.items()):
        out.append(f"gang {s.groups()[0]} runs with a role below its minimum")
    for name, members, k in s.sets:
        whole = sum(1 for m in members if bound.get(m, 0) >= s.minimums[m])
        if whole < k and any(bound.get(m, 0) for m in members):
            out.append(f"set {name}: {whole} of {k} groups at their minimum, members bound")
    return out


# ------------------------------------------------------------------ one shape

def run_shape(cluster: Any, api: client.ApiClient, s: Shape, system: str, hold: float) -> dict[str, Any]:
    cb.set_nodes(cluster, 1, **s.node)
    ns = cb.new_namespace(api, system[:3])
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    try:
        if system == "cogate":
            for body in cogate_groups(s):
                cb.create_pod_group(api, ns, body)
        else:
            for plural, body in native_objects(s):
                custom.create_namespaced_custom_object(NATIVE_GROUP, NATIVE_VERSION, ns, plural, body)
        t0 = time.monotonic()
        for body in pods(system, s):
            core.create_namespaced_pod(ns, body)
        time.sleep(hold)
        bound: dict[str, int] = {}
        for p in core.list_namespaced_pod(ns, label_selector=PART_LABEL).items:
            key = p.metadata.labels[PART_LABEL]
            bound[key] = bound.get(key, 0) + (1 if p.spec.node_name else 0)
        units = list(s.roles) if s.roles is not None else s.groups()
        sizes = {_part_key(p, s.roles is not None): 0 for p in s.parts}
        for p in s.parts:
            sizes[_part_key(p, s.roles is not None)] += p.n
        mins = dict(s.roles) if s.roles is not None else s.minimums
        return {"bound": {u: bound.get(u, 0) for u in units}, "sizes": sizes,
                "partly": partly(s, bound), "seconds": round(time.monotonic() - t0, 1),
                "said": {u: said(api, system, ns, u, s) for u in units if bound.get(u, 0) < mins[u]}}
    finally:
        cb.delete_namespace(api, ns)


def _system(system: str, quick: bool) -> dict[str, dict[str, Any]]:
    hold = 8.0 if quick else 20.0
    with cb.control_plane(kubernetes_version=RELEASE, feature_gates=GATES) as c:
        versions = c.kubectl("api-versions").stdout.split()
        if f"{NATIVE_GROUP}/{NATIVE_VERSION}" not in versions:
            raise RuntimeError(f"{RELEASE} with {GATES} does not serve {NATIVE_GROUP}/{NATIVE_VERSION}")
        with cb.cogate_stack(c) if system == "cogate" else contextlib.nullcontext():
            api = cb.api_client(c)
            out = {}
            for s in shapes():
                cb.log(f"{NAME}: {system}: {s.label}")
                out[s.label] = run_shape(c, api, s, system, hold)
                cb.log(f"{NAME}: {system}: {s.label}: {out[s.label]}")
            api.close()
    return out


def _bound_text(r: dict[str, Any]) -> str:
    return ", ".join(f"{u} {n}/{r['sizes'][u]}" for u, n in r["bound"].items())


def run(quick: bool, out_dir: Path) -> dict[str, Any]:
    res = {s: _system(s, quick) for s in SYSTEMS}
    rows, said_rows, targets = [], [], []
    for s in shapes():
        a, b = res["cogate"][s.label], res["native"][s.label]
        rows.append([s.label, s.expected, _bound_text(a), _bound_text(b), "; ".join(a["partly"]) or "no",
                     "; ".join(b["partly"]) or "no"])
        for u in sorted(set(a["said"]) | set(b["said"])):
            said_rows.append([s.label, u, a["said"].get(u, "(at its minimum)"), b["said"].get(u, "(at its minimum)")])
    ok = {label: not res["cogate"][label]["partly"] for label in res["cogate"]}
    targets.append(cb.target("a gang or set run below its minimum (cogate), any shape", "never",
                             "; ".join(f"{k}: {'; '.join(res['cogate'][k]['partly'])}" for k, v in ok.items() if not v)
                             or "never", all(ok.values())))
    steal = next(s.label for s in shapes() if s.label.startswith("KEP-6012"))
    got = res["cogate"][steal]["bound"]
    targets.append(cb.target("KEP-6012 stealing shape (cogate)", "c1 2 + c2 2", f"c1 {got['c1']} + c2 {got['c2']}",
                             got == {"c1": 2, "c2": 2}))
    notes = [f"Both systems on v{RELEASE} control planes with feature gates "
             + ", ".join(f"{k}=true" for k in GATES) + f" (the API {NATIVE_GROUP}/{NATIVE_VERSION} served: "
             "compositepodgroups, podgroups), one after the other, one kwok node per shape. cogate with its "
             "defaults; native with kube-scheduler's default configuration (its gang plugins on with the gates).",
             "Bound counts are read after the pods were created and the hold passed (20 s; 8 s with --quick): "
             "what each system settled on, not how fast.",
             "raw figures: " + json.dumps(res)]
    return cb.result(
        NAME, TITLE,
        "Issue 33's shapes (ps + workers where only ps fits, two sets competing for one room, KEP-6012's "
        "stealing shape, a RayCluster-like gang whose GPU role is short) through cogate's sets and role "
        "minimums and through kube-scheduler's CompositePodGroup (scheduling.k8s.io/v1alpha3), each on its own "
        "v1.37.2 control plane: pods bound per group or role, whether a gang or set ran below its minimum, what "
        "each said about a group that did not start.",
        "native CompositePodGroup, same shapes, same machine, same run.",
        tables=[cb.table("Pods bound per group (or role) after the hold, and runs below a minimum",
                         ["shape", "issue 33 asks", "cogate bound", "native bound", "cogate below a minimum",
                          "native below a minimum"], rows),
                cb.table("What each said about a group or role below its minimum at the end",
                         ["shape", "group or role", "cogate", "native"], said_rows)],
        targets=targets, notes=notes)


if __name__ == "__main__":
    cb.main(run)
