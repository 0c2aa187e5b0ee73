"""Issue 32 item 6: topology-aware gangs side by side: cogate, kube-scheduler 1.37's own and Kueue's TAS.

kube-scheduler 1.37 places a gang inside one topology domain itself (KEP-5732, feature gate
``TopologyAwareWorkloadScheduling``, alpha since 1.36, on top of ``GenericWorkload``): a
``scheduling.k8s.io/v1beta1`` PodGroup with ``spec.schedulingPolicy.gang.minCount`` and
``spec.schedulingConstraints.topology: [{key: <node label>}]`` (one required key, no preferred
level; the default plugins gain ``TopologyPlacementGenerator`` with the gate), pods naming it in
``spec.schedulingGroup.podGroupName``. Kueue 0.17 places a Job's pods inside one domain of a
``Topology`` at admission (Topology Aware Scheduling, beta and on by default; annotations on the pod
template: ``kueue.x-k8s.io/podset-required-topology`` or ``podset-preferred-topology``, one of them,
its validation refuses both), counting each domain's free capacity from its nodes' allocatable,
then ungates the pods with node selectors of their assigned nodes; it also does quota and
queueing (ClusterQueue, LocalQueue), which cogate does not. This benchmark runs the same gang
streams through the three, each on its own v1.37.2 control plane with both gates on (one after the
other, the same kwok nodes):

- **cogate**: its CRD, webhook and controller (``--topology-levels example.com/block,example.com/rack``);
  each gang a cogate PodGroup with ``topology.cogate.dev/required: example.com/rack``;
- **native**: no cogate; each gang a native PodGroup whose topology key is ``example.com/rack``;
- **kueue**: no cogate; Kueue's controller manager as a host process (:mod:`cogate.localcluster.kueue`,
  built on first use), a ``Topology`` of block, rack and ``kubernetes.io/hostname``, a
  ResourceFlavor of the benchmark's nodes with that topology, a ClusterQueue whose quota is the
  whole cluster (136 CPU: quota never holds a gang back, capacity does) and a LocalQueue; each gang
  a batch Job (parallelism = completions = members) in that queue whose pod template says
  ``podset-required-topology: example.com/rack``.

Topology (kwok nodes, 1 CPU members): 2 blocks x 4 racks x 4 nodes; a rack's nodes have 2, 4 or 8
CPU (racks of 8, 16 or 32 member slots, 136 in all, :data:`RACK_CPU`). Three streams
(:data:`STREAMS`), each on fresh nodes, gangs created one after another (PodGroup, then a
ReplicaSet of its members) every :data:`INTERVAL` s: :data:`GANGS` gangs of 3 to 16 members
(seeded; more members than slots, so some must wait), rack required; small gangs first, then large
ones (:data:`SMALL_FIRST`), rack required; gangs that fit one rack (:data:`PREFERRED`), block
required and rack preferred (native: block required, it has no preferred level; Kueue: rack
preferred, it takes one annotation, so no block fence: its preferred level widens up to the top).

Per system and stream, read from one pod watch once no pod was bound for :data:`SETTLE` s: **gangs
placed** (every member bound), **racks each placed gang spans** (1 is right under a required rack), **half-placed** gangs
(0 < bound < members), gangs **left waiting although a rack could hold them** (none bound, and
some rack's free room at the end holds all its members, 1 CPU each), and **time until bound**
(from the gang's creation to its last member bound: median and max over placed gangs) and until
the last gang placed.

    python bench/bench_topology_native.py [--quick]       # prints RESULT <json>
    python bench/run.py --only bench_topology_native
"""

from __future__ import annotations

import contextlib
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubernetes import client

sys.path.insert(0, str(Path(__file__).resolve().parent))
import clusterbench as cb  # noqa: E402

from cogate.api import API_VERSION, KIND  # noqa: E402
from cogate.localcluster import nodes as fake_nodes  # noqa: E402
from cogate.localcluster.build import ensure_binaries  # noqa: E402
from cogate.localcluster.kueue import KUEUE, Kueue  # noqa: E402
from cogate.localcluster.versions import KUEUE as KUEUE_RELEASE  # noqa: E402

NAME = "topology_native"
TITLE = ("Topology-aware gangs side by side: cogate, kube-scheduler 1.37.2 (TopologyAwareWorkloadScheduling) "
         "and Kueue 0.17 (Topology Aware Scheduling)")
NEEDS_CLUSTER = True
RELEASE = "1.37.2"
GATES = {"GenericWorkload": True, "TopologyAwareWorkloadScheduling": True}
NATIVE_GROUP, NATIVE_VERSION, NATIVE_PLURAL = "scheduling.k8s.io", "v1beta1", "podgroups"
SYSTEMS = ("cogate", "native", "kueue")
KUEUE_GROUP, KUEUE_VERSION = "kueue.x-k8s.io", "v1beta2"
#: The Topology, ResourceFlavor, ClusterQueue and LocalQueue of the Kueue run share this name.
QUEUE = "bench"
HOSTNAME = "kubernetes.io/hostname"
BLOCK, RACK = "example.com/block", "example.com/rack"
#: CPU of each node, per rack (block b0 first): 4 nodes a rack.
RACK_CPU = (2, 4, 8, 4, 2, 8, 4, 2)
NODES_PER_RACK = 4
GANGS, INTERVAL, SETTLE = 24, 0.3, 15.0
SIZES = (3, 4, 6, 8, 12, 16)
#: The second stream: small gangs first, then large ones (a fit that spends the large racks on the
#: small gangs leaves the large gangs waiting): sizes in creation order.
SMALL_FIRST = (6, 6, 6, 6, 12, 12, 12, 12, 28, 28, 8, 8)
#: The third stream: gangs that fit one rack, required in one block and preferred in one rack
#: (cogate; native has no preferred level: required block).
PREFERRED = (6, 12, 8, 16, 6, 12, 8, 6, 12, 8)
STREAMS = ("random sizes", "small first, then large", "block required, rack preferred")


def racks() -> dict[str, tuple[str, int, list[str]]]:
    """rack -> (block, CPU per node, node names)."""
    out = {}
    for k, cpu in enumerate(RACK_CPU):
        block, rack = f"b{k // 4}", f"b{k // 4}-r{k % 4}"
        out[rack] = (block, cpu, [f"{rack}-n{i}" for i in range(NODES_PER_RACK)])
    return out


def gangs(quick: bool, stream: str = STREAMS[0], seed: int = 7) -> list[tuple[str, int]]:
    """(name, members) of ``stream`` in creation order."""
    if stream in STREAMS[1:]:
        sizes = SMALL_FIRST if stream == STREAMS[1] else PREFERRED
        return [(f"g{i:02d}", n) for i, n in enumerate(sizes[::2] if quick else sizes)]
    rng = random.Random(seed)
    return [(f"g{i:02d}", rng.choice(SIZES)) for i in range(6 if quick else GANGS)]


def set_topology_nodes(cluster: Any) -> None:
    """Replace every kwok node by the racks' nodes, labelled with their block and rack; wait Ready."""
    api = cb.api_client(cluster)
    core = client.CoreV1Api(api)
    try:
        old = [n.metadata.name for n in core.list_node(label_selector="type=kwok").items]
        cb.parallel(lambda n: core.delete_node(n), old)
        cb.wait_for(lambda: not core.list_node(label_selector="type=kwok").items, 120, "old kwok nodes deleted")
        bodies = [fake_nodes.node_manifest(n, cpu=str(cpu), memory="64Gi", kwok_taint=False,
                                           labels={BLOCK: block, RACK: rack, cb.NODE_LABEL[0]: cb.NODE_LABEL[1]})
                  for rack, (block, cpu, names) in racks().items() for n in names]
        cb.parallel(lambda b: core.create_node(b, _preload_content=False), bodies)
        fake_nodes.wait_nodes_ready(api, [b["metadata"]["name"] for b in bodies], 300)
    finally:
        api.close()


def pod_group(system: str, name: str, size: int, stream: str = STREAMS[0]) -> dict[str, Any]:
    """The gang's PodGroup: required rack; on the third stream required block, preferred rack (cogate)
    or required block (native: one key, no preferred level)."""
    required = BLOCK if stream == STREAMS[2] else RACK
    if system == "cogate":
        annotations = {"topology.cogate.dev/required": required}
        if stream == STREAMS[2]:
            annotations["topology.cogate.dev/preferred"] = RACK
        return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name, "annotations": annotations},
                "spec": {"minMember": size}}
    return {"apiVersion": f"{NATIVE_GROUP}/{NATIVE_VERSION}", "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"schedulingPolicy": {"gang": {"minCount": size}},
                     "schedulingConstraints": {"topology": [{"key": required}]}}}


def kueue_objects() -> list[tuple[str, dict[str, Any]]]:
    """(plural, body) of the cluster-scoped Kueue objects: the Topology (block, rack, hostname), the
    ResourceFlavor of the benchmark's nodes with it, and a ClusterQueue whose quota is every CPU of
    :data:`RACK_CPU` (and memory to match), open to every namespace."""
    api = f"{KUEUE_GROUP}/{KUEUE_VERSION}"
    cpu = sum(RACK_CPU) * NODES_PER_RACK
    return [
        ("topologies", {"apiVersion": api, "kind": "Topology", "metadata": {"name": QUEUE},
                        "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOSTNAME}]}}),
        ("resourceflavors", {"apiVersion": api, "kind": "ResourceFlavor", "metadata": {"name": QUEUE},
                             "spec": {"nodeLabels": {cb.NODE_LABEL[0]: cb.NODE_LABEL[1]}, "topologyName": QUEUE}}),
        ("clusterqueues", {"apiVersion": api, "kind": "ClusterQueue", "metadata": {"name": QUEUE},
                           "spec": {"namespaceSelector": {}, "resourceGroups": [{
                               "coveredResources": ["cpu", "memory"],
                               "flavors": [{"name": QUEUE, "resources": [
                                   {"name": "cpu", "nominalQuota": str(cpu)},
                                   {"name": "memory", "nominalQuota": f"{64 * len(RACK_CPU) * NODES_PER_RACK}Gi"}]}]}]}}),
    ]


def job(name: str, size: int, stream: str = STREAMS[0]) -> dict[str, Any]:
    """The gang as a Kueue batch Job: ``size`` pods of 1 CPU (the members of :func:`replica_set`),
    parallelism = completions = ``size``, suspended, in the LocalQueue :data:`QUEUE`; its pod template
    requires one rack, or on the third stream prefers one (Kueue takes one topology annotation). Its
    pods run for an hour: kwok's ``pod-complete`` stage (``localcluster/kwok-stages.yaml``) would
    end a Job's pods after 5 s and free their room, which the ReplicaSets' members never do."""
    pod = cb.pod("x", group=name, cpu="1", memory="64Mi")
    key = "preferred" if stream == STREAMS[2] else "required"
    tmpl = {"metadata": {"labels": pod["metadata"]["labels"],
                         "annotations": {f"kueue.x-k8s.io/podset-{key}-topology": RACK,
                                         "pod-complete.stage.kwok.x-k8s.io/delay": "3600s"}},
            "spec": {**pod["spec"], "restartPolicy": "Never"}}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}},
            "spec": {"parallelism": size, "completions": size, "suspend": True, "template": tmpl}}


def replica_set(system: str, name: str, size: int) -> dict[str, Any]:
    body = cb.replica_set(name, size, group=name, cpu="1", memory="64Mi")
    if system == "native":
        body["spec"]["template"]["spec"]["schedulingGroup"] = {"podGroupName": name}
    return body


def _create_gang(api: client.ApiClient, system: str, ns: str, name: str, size: int, stream: str) -> None:
    """cogate and native: the PodGroup, then a ReplicaSet of the members; kueue: the Job."""
    if system == "kueue":
        client.BatchV1Api(api).create_namespaced_job(ns, job(name, size, stream), _preload_content=False)
        return
    body = pod_group(system, name, size, stream)
    if system == "cogate":
        cb.create_pod_group(api, ns, body)
    else:
        client.CustomObjectsApi(api).create_namespaced_custom_object(NATIVE_GROUP, NATIVE_VERSION, ns, NATIVE_PLURAL,
                                                                     body, _preload_content=False)
    cb.create_replica_set(api, ns, replica_set(system, name, size))


def outcome(stream: list[tuple[str, int]], created: dict[str, float], bound: dict[str, list[tuple[float, str]]]
            ) -> dict[str, Any]:
    """The figures of the module doc from ``created`` (gang -> time) and ``bound`` (gang -> [(time,
    node)] of its bound members). Pure."""
    rack_of = {n: rack for rack, (_, _, names) in racks().items() for n in names}
    used: dict[str, int] = {}
    for members in bound.values():
        for _, node in members:
            used[node] = used.get(node, 0) + 1
    free_slots = {rack: sum(cpu - used.get(n, 0) for n in names) for rack, (_, cpu, names) in racks().items()}
    placed, half, waiting_fits, spans, times = [], [], [], {}, []
    for name, size in stream:
        members = bound.get(name, [])
        if len(members) >= size:
            placed.append(name)
            spans[name] = len({rack_of.get(n, n) for _, n in members})
            times.append(max(t for t, _ in members) - created[name])
        elif members:
            half.append(name)
        elif any(free >= size for free in free_slots.values()):
            waiting_fits.append(name)
    return {"gangs": len(stream), "placed": len(placed), "members placed": sum(s for n, s in stream if n in placed),
            "spans": spans, "more than one rack": sorted(n for n, s in spans.items() if s > 1),
            "half placed": half, "waiting though a rack holds them": waiting_fits,
            "median s": round(statistics.median(times), 2) if times else None,
            "max s": round(max(times), 2) if times else None, "free slots per rack": free_slots,
            "racks per placed gang": round(statistics.mean(spans.values()), 2) if spans else None}


def _settle(watch: cb.PodWatch, ns: str, settle: float, timeout: float) -> None:
    """Until no pod of ``ns`` was bound for ``settle`` s (or ``timeout``)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with watch.lock:
            last = max((t for t, n, _, _ in watch.bind_log if n == ns), default=None)
        now = time.monotonic()
        if last is not None and now - last >= settle or last is None and now - watch_start(watch, ns) >= settle:
            return
        time.sleep(0.5)


def watch_start(watch: cb.PodWatch, ns: str) -> float:
    with watch.lock:
        return min((r.created for (n, _), r in watch.records.items() if n == ns), default=time.monotonic())


def run_stream(cluster: Any, api: client.ApiClient, watch: cb.PodWatch, system: str, quick: bool,
               which: str) -> dict[str, Any]:
    set_topology_nodes(cluster)
    ns = cb.new_namespace(api, system[:3])
    stream = gangs(quick, which)
    created: dict[str, float] = {}
    try:
        if system == "kueue":
            client.CustomObjectsApi(api).create_namespaced_custom_object(
                KUEUE_GROUP, KUEUE_VERSION, ns, "localqueues",
                {"apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}", "kind": "LocalQueue", "metadata": {"name": QUEUE},
                 "spec": {"clusterQueue": QUEUE}}, _preload_content=False)
        t0 = time.monotonic()
        for name, size in stream:
            created[name] = time.monotonic()
            _create_gang(api, system, ns, name, size, which)
            time.sleep(INTERVAL)
        _settle(watch, ns, 5.0 if quick else SETTLE, 120 if quick else 600)
        bound: dict[str, list[tuple[float, str]]] = {}
        with watch.lock:
            for (n, _), r in watch.records.items():
                if n == ns and r.bound is not None and r.group and r.deleted is None:
                    bound.setdefault(r.group, []).append((r.bound, r.node or ""))
            last = max((t for t, n, _, _ in watch.bind_log if n == ns), default=t0)
        out = outcome(stream, created, bound)
        out["until last placed s"] = round(last - t0, 2)
        waiting = [n for n, _ in stream if n not in out["spans"]]
        out["said"] = {name: _said(api, system, ns, name) for name in waiting[:2]}
        return out
    finally:
        cb.delete_namespace(api, ns)


def _said(api: client.ApiClient, system: str, ns: str, name: str) -> str:
    custom = client.CustomObjectsApi(api)
    if system == "kueue":
        return _kueue_said(custom, ns, name)
    try:
        if system == "cogate":
            from cogate.api import GROUP, PLURAL, VERSION
            obj = custom.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name)
        else:
            obj = custom.get_namespaced_custom_object(NATIVE_GROUP, NATIVE_VERSION, ns, NATIVE_PLURAL, name)
    except client.ApiException as exc:
        return f"(PodGroup not read: HTTP {exc.status})"
    conds = (obj.get("status") or {}).get("conditions") or []
    text = "; ".join(f"{c.get('type')}={c.get('status')} {c.get('reason') or ''}: {(c.get('message') or '')[:200]}"
                     for c in conds)
    if system == "native":
        pods = client.CoreV1Api(api).list_namespaced_pod(ns, label_selector=f"{cb.POD_GROUP_LABEL}={name}").items
        cond = next((c for p in pods for c in p.status.conditions or [] if c.type == "PodScheduled"), None)
        if cond is not None:
            text += f"; a pod: PodScheduled={cond.status} {cond.reason or ''}: {(cond.message or '')[:200]}"
    return text or "(no conditions)"


def _kueue_said(custom: client.CustomObjectsApi, ns: str, name: str) -> str:
    """The conditions of the Workload Kueue made for Job ``name`` (owned by it)."""
    try:
        items = custom.list_namespaced_custom_object(KUEUE_GROUP, KUEUE_VERSION, ns, "workloads")["items"]
    except client.ApiException as exc:
        return f"(Workloads not read: HTTP {exc.status})"
    wl = next((w for w in items if any(o.get("name") == name for o in w["metadata"].get("ownerReferences") or [])),
              None)
    if wl is None:
        return "(no Workload)"
    conds = (wl.get("status") or {}).get("conditions") or []
    return "; ".join(f"{c.get('type')}={c.get('status')} {c.get('reason') or ''}: {(c.get('message') or '')[:240]}"
                     for c in conds) or "(no conditions)"


@contextlib.contextmanager
def _stack(system: str, cluster: Any) -> Iterator[dict[str, Any]]:
    """What ``system`` runs beside the control plane; yields facts for the notes (Kueue's build time,
    0 when cached, and its log's directory, a temporary one kept after the run)."""
    if system == "cogate":
        with cb.cogate_stack(cluster, f"--topology-levels={BLOCK},{RACK}"):
            yield {}
        return
    if system == "native":
        yield {}
        return
    spent = ensure_binaries([KUEUE], log=sys.stderr)[KUEUE]
    workdir = Path(tempfile.mkdtemp(prefix="cogate-bench-kueue-"))
    cb.log(f"{NAME}: kueue: its log and configuration in {workdir}")
    with Kueue(cluster, workdir):
        api = cb.api_client(cluster)
        try:
            custom = client.CustomObjectsApi(api)
            for plural, body in kueue_objects():
                custom.create_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, plural, body, _preload_content=False)
        finally:
            api.close()
        yield {"kueue build s": round(spent, 1)}


def _system(system: str, quick: bool) -> dict[str, Any]:
    with cb.control_plane(kubernetes_version=RELEASE, feature_gates=GATES) as c:
        versions = c.kubectl("api-versions").stdout.split()
        if f"{NATIVE_GROUP}/{NATIVE_VERSION}" not in versions:
            raise RuntimeError(f"{RELEASE} with {GATES} does not serve {NATIVE_GROUP}/{NATIVE_VERSION}")
        with _stack(system, c) as facts:
            api = cb.api_client(c)
            out: dict[str, Any] = dict(facts)
            with cb.PodWatch(api) as watch:
                for which in STREAMS:
                    cb.log(f"{NAME}: {system}: {which}")
                    out[which] = run_stream(c, api, watch, system, quick, which)
                    cb.log(f"{NAME}: {system}: {which}: {out[which]}")
            api.close()
    return out


def run(quick: bool, out_dir: Path) -> dict[str, Any]:
    res = {s: _system(s, quick) for s in SYSTEMS}
    rows, said, targets = [], [], []
    for which in STREAMS:
        for s in SYSTEMS:
            r = res[s][which]
            rows.append([which, s, r["gangs"], r["placed"], r["members placed"], r["racks per placed gang"],
                         len(r["more than one rack"]),
                         len(r["half placed"]), len(r["waiting though a rack holds them"]), r["median s"], r["max s"],
                         r["until last placed s"]])
            said += [[which, s, g, t] for g, t in r["said"].items()]
    for what, key, streams in (("gangs placed in more than one rack, rack required", "more than one rack", STREAMS[:2]),
                               ("half-placed gangs", "half placed", STREAMS)):
        counts = {s: sum(len(res[s][w][key]) for w in streams) for s in SYSTEMS}
        targets.append(cb.target(f"{what}, every stream", "none (cogate)",
                                 ", ".join(f"{s} {counts[s]}" for s in SYSTEMS), counts["cogate"] == 0))
    left = {s: sum(len(res[s][w]["waiting though a rack holds them"]) for w in STREAMS) for s in SYSTEMS}
    targets.append(cb.target("gangs left waiting although a rack holds them, every stream", "none (cogate)",
                             ", ".join(f"{s} {left[s]}" for s in SYSTEMS), left["cogate"] == 0))
    sizes = "; ".join(f"{w}: " + ", ".join(str(n) for _, n in gangs(quick, w)) for w in STREAMS)
    return cb.result(
        NAME, TITLE,
        f"Three streams of gangs of 1-CPU members on {len(RACK_CPU) * NODES_PER_RACK} kwok nodes in 2 blocks x 4 racks "
        f"(racks of 8, 16 or 32 member slots, {sum(RACK_CPU) * NODES_PER_RACK} in all), each gang required in one "
        f"rack, created one after another every {INTERVAL} s: {len(gangs(quick))} gangs of random sizes; small "
        "gangs first, then large ones; and gangs that fit one rack, required in one block with one rack preferred "
        "(native: block required, it has no preferred level; Kueue: rack preferred, it takes one topology "
        "annotation); through cogate, through kube-scheduler's own topology-aware workload scheduling and through "
        "Kueue 0.17's Topology Aware Scheduling (each gang a batch Job in a LocalQueue whose ClusterQueue's quota is "
        "the whole cluster), each on its own v1.37.2 control plane with GenericWorkload and "
        f"TopologyAwareWorkloadScheduling on. Read once no pod was bound for {5 if quick else SETTLE:.0f} s.",
        "kube-scheduler 1.37.2's native gang + topology scheduling and Kueue 0.17's TAS, same streams, same nodes, "
        "same machine.",
        tables=[cb.table("Gangs placed, racks spanned, half-placed, waiting though a rack holds them, time until bound "
                         "(from a gang's creation to its last member bound)",
                         ["stream", "system", "gangs", "placed", "members placed", "racks per placed gang",
                          "placed in > 1 rack", "half placed",
                          "waiting though a rack holds them", "median s to bound", "max s to bound",
                          "until last placed s"], rows),
                cb.table("What each said about a gang left waiting (the first two of each stream)",
                         ["stream", "system", "gang", "said"], said)],
        targets=targets,
        notes=["Gang sizes in creation order: " + sizes,
               f"Kueue {KUEUE_RELEASE} built for this run in {res['kueue']['kueue build s']} s (0: cached in the binary "
               "cache; `python -m cogate.localcluster.build kueue`), run as a host process with its webhooks on "
               "127.0.0.1 (cogate.localcluster.kueue); quota and queueing are Kueue's too, cogate and kube-scheduler "
               "have none here.",
               "raw figures: " + json.dumps(res)])


if __name__ == "__main__":
    cb.main(run)
