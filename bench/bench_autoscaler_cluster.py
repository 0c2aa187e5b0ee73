"""Issue 16 item 6: growing the cluster for a gang, side by side on one real control plane.

One LocalCluster with the real cluster-autoscaler 1.36.1 (kwok provider, :data:`SPEC`: node groups
of 16-CPU / 64Gi / 110-pod nodes, min 0, scale-down off, ``--scan-interval=1s`` as the e2e
fixture; ``autoscaled`` up to 4 nodes, ``wide`` up to 8) and cogate's webhook + controller with
``--provisioning-class best-effort-atomic-scale-up.autoscaling.x-k8s.io``. No other node: every
node is one the autoscaler adds. Members select their group (``nodeSelector
cogate.dev/node-group``), request their CPU and 1Gi each.

The workloads (:data:`WORKLOADS`), each through two systems on the same control plane:

- (a) **cogate**: a PodGroup (created first, minMember = size), members labelled; cogate asks the
  autoscaler for the whole gang with a ProvisioningRequest and releases it pinned once the nodes
  are there;
- (b) **the autoscaler alone**: the same pods unlabelled (cogate running but not involved): the
  autoscaler scales up for kube-scheduler's unschedulable pods, kube-scheduler binds each pod as
  its node comes.

Why the node counts are what they are: the autoscaler simulates a new node as its template plus a
kube-proxy pod of 100 millicores (tests/e2e/test_autoscaler.py), so a simulated 16-CPU node holds
two 6-CPU pods but only one 8-CPU or 12-CPU pod; the real nodes have the whole 16 CPU.

1. gangs that fit on new nodes: 4 x 6 CPU on ``autoscaled`` (2 new nodes), 8 x 8 CPU on ``wide``
   (8 new nodes by the simulation); each repeated :data:`REPEATS` times, the systems alternating;
   per run: time from the first create call to every member bound (one pod watch,
   :class:`clusterbench.PodWatch`, is the clock), nodes added, nodes left with no member, and the
   timeline (watches of nodes, ProvisioningRequests and PodGroups on the same clock,
   :class:`clusterbench.ObjectWatch`): request created -> ``Provisioned=True`` -> first node seen ->
   every node Ready -> first and last member ungated (cogate's release) -> first and every member
   bound;
2. a gang that cannot fit whole: 5 x 12 CPU on ``autoscaled`` (5 new nodes needed, at most 4),
   watched for :attr:`Workload.hold_s`: nodes added (all in vain: the gang can never start), pods
   bound (a useless partial gang), the autoscaler's target at the end, and for cogate how long
   until its PodGroup says why (``Provisioning=True`` reason ``NotProvisioned``).

Between runs the group is reset to no node (:func:`cogate.localcluster.autoscaler.reset`: the
namespace deleted, the autoscaler restarted, nothing remembered), as the e2e fixture does. A
fitting run ends 3 s after the gang is bound (a late node still counts).

Targets (issue 16): nodes added in vain for a gang that cannot fit whole: cogate 0 (measured for the
autoscaler alone); no member of it bound. Time: the issue sets no target; the ratio cogate / alone is
reported (median of the runs and every run).

    python bench/bench_autoscaler_cluster.py [--quick]    # prints RESULT <json>
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from kubernetes import client

sys.path.insert(0, str(Path(__file__).resolve().parent))
import clusterbench as cb  # noqa: E402

from cogate.api import GROUP, PLURAL, VERSION  # noqa: E402
from cogate.controller.provisioning import provreq  # noqa: E402
from cogate.localcluster import autoscaler as ca  # noqa: E402
from cogate.localcluster.nodes import node_ready  # noqa: E402

NAME = "autoscaler_cluster"
TITLE = "Growing the cluster side by side: cogate's ProvisioningRequests, cluster-autoscaler alone"
NEEDS_CLUSTER = True
SYSTEMS = ("cogate", "alone")
SYSTEM_TITLE = {"cogate": "cogate", "alone": "autoscaler alone"}
#: Fitting workloads are run this many times per system (a single run is noise on a shared machine).
REPEATS = 3
AFTER_BOUND_S = 3.0
MEMBER_MEMORY = "1Gi"

#: The e2e fixture's group (16 CPU, 64Gi, 110 pods, 0 to 4 nodes) and a wider one of the same nodes.
WIDE = ca.NodeGroup("wide", cpu=16_000, memory=64 * 2**30, pods=110, labels={ca.GROUP_LABEL: "wide"},
                    min=0, max=8)
SPEC = ca.AutoscalerSpec(groups=(ca.AUTOSCALED, WIDE), scale_down=False, scan_interval=1.0)
#: --quick: the e2e fixture's spec exactly (tests/e2e/conftest.py AUTOSCALER_SPEC), so the smoke
#: test can run the quick workloads on the session's autoscaled cluster.
QUICK_SPEC = ca.AutoscalerSpec(groups=(ca.AUTOSCALED,), scale_down=False, scan_interval=1.0)


@dataclass(frozen=True)
class Workload:
    """One gang of ``size`` members of ``cpu`` (a quantity) on node group ``group``; ``fits``: the
    group can hold the gang whole (by the autoscaler's simulation); ``expected_nodes``: what the
    autoscaler's simulation needs for it (whole gang)."""

    size: int
    cpu: str
    group: str
    fits: bool
    expected_nodes: int
    hold_s: float = 30.0  # how long a gang that cannot fit is watched (from the first create call)

    def max_nodes(self, spec: ca.AutoscalerSpec) -> int:
        return spec.group(self.group).max

    def label(self, spec: ca.AutoscalerSpec) -> str:
        what = (f"fits on {self.expected_nodes} new nodes" if self.fits
                else f"needs {self.expected_nodes} new nodes, max {self.max_nodes(spec)}")
        return f"{self.size} x {self.cpu} CPU on {self.group} (max {self.max_nodes(spec)}), {what}"


WORKLOADS = (Workload(4, "6", "autoscaled", True, 2), Workload(8, "8", "wide", True, 8),
             Workload(5, "12", "autoscaled", False, 5))
QUICK_WORKLOADS = (Workload(4, "6", "autoscaled", True, 2), Workload(5, "12", "autoscaled", False, 5, hold_s=15.0))


def unavailable() -> str | None:
    from cogate.localcluster import build

    if build.binary("cluster-autoscaler").exists():
        return None
    try:
        build.source_dir("cluster-autoscaler")
    except build.MissingSource as exc:
        return f"the cluster-autoscaler binary is not built and its source is missing ({exc})"
    return None


# ------------------------------------------------------------------ the cluster

@contextlib.contextmanager
def autoscaled_plane(spec: ca.AutoscalerSpec, cluster: Any = None) -> Iterator[Any]:
    """``cluster`` itself when given (its autoscaler must run ``spec``'s groups), else a new
    LocalCluster with the autoscaler of ``spec``, stopped on exit."""
    if cluster is not None:
        have = {g.name for g in cluster.autoscaler.groups} if cluster.autoscaler else set()
        missing = {g.name for g in spec.groups} - have
        if missing:
            raise ValueError(f"the cluster's autoscaler has no node group {sorted(missing)}")
        yield cluster
        return
    from cogate.localcluster import versions
    from cogate.localcluster.build import ensure_binaries
    from cogate.localcluster.cluster import LocalCluster

    ensure_binaries([*versions.CONTROL_PLANE_TOOLS, *versions.AUTOSCALER_TOOLS], log=sys.stderr)
    c = LocalCluster(timeout=120, autoscaler=spec)
    c.start()
    try:
        yield c
    finally:
        c.stop()


def _node_facts(obj: dict[str, Any]) -> list[str]:
    return ["Ready"] if node_ready(obj) else []


def _condition_facts(obj: dict[str, Any]) -> list[str]:
    """``Type=Status`` and ``Type=Status/Reason`` of each condition (PodGroup, ProvisioningRequest)."""
    out = []
    for c in (obj.get("status") or {}).get("conditions") or []:
        out += [f"{c.get('type')}={c.get('status')}", f"{c.get('type')}={c.get('status')}/{c.get('reason')}"]
    return out


@dataclass
class Watches:
    pods: cb.PodWatch
    nodes: cb.ObjectWatch
    requests: cb.ObjectWatch
    groups: cb.ObjectWatch


@contextlib.contextmanager
def watches(api: client.ApiClient) -> Iterator[Watches]:
    with cb.PodWatch(api) as pods, cb.ObjectWatch(api, "nodes", _node_facts) as nodes, \
            cb.ObjectWatch(api, f"{provreq.GROUP}/{provreq.VERSION}/{provreq.PLURAL}", _condition_facts) as reqs, \
            cb.ObjectWatch(api, f"{GROUP}/{VERSION}/{PLURAL}", _condition_facts) as groups:
        yield Watches(pods, nodes, reqs, groups)


# ------------------------------------------------------------------ one run

def member(name: str, w: Workload, gang: bool) -> dict[str, Any]:
    body = cb.pod(name, group="g" if gang else None, cpu=w.cpu, memory=MEMBER_MEMORY)
    body["spec"]["nodeSelector"] = {ca.GROUP_LABEL: w.group}
    return body


def _rel(t: float | None, t0: float) -> float | None:
    return round(t - t0, 2) if t is not None else None


def _conditions(obj: dict[str, Any] | None) -> str:
    if not obj:
        return ""
    return "; ".join(f"{c.get('type')}={c.get('status')} {c.get('reason') or ''}: {(c.get('message') or '')[:240]}"
                     for c in (obj.get("status") or {}).get("conditions") or [])


def run_once(cluster: Any, api: client.ApiClient, w_: Watches, spec: ca.AutoscalerSpec, w: Workload, system: str,
             timeout: float) -> dict[str, Any]:
    """One workload through one system on a group with no node; the figures of the module doc."""
    gang = system == "cogate"
    ns = cb.new_namespace(api, f"as-{system[:5]}")
    load = round(os.getloadavg()[0], 1)
    try:
        names = [f"m-{i}" for i in range(w.size)]
        t0 = time.monotonic()
        if gang:
            cb.create_pod_group(api, ns, cb.pod_group("g", w.size))
        cb.parallel(lambda n: cb.create_pod(api, ns, member(n, w, gang)), names)
        reached = None
        if w.fits:
            with contextlib.suppress(TimeoutError):
                reached = w_.pods.wait_bound(ns, w.size, timeout) - t0
        time.sleep(max(0.0, t0 + (reached + AFTER_BOUND_S if reached is not None else w.hold_s) - time.monotonic()))
        end = time.monotonic()
        pods = [r for r in w_.pods.pods(ns)]
        bound = sorted(r.bound for r in pods if r.bound is not None and r.bound <= end)
        ungated = sorted(r.ungated for r in pods if r.ungated is not None and gang and r.ungated <= end)
        used = {r.node for r in pods if r.node}
        nodes = {k[1]: v for k, v in w_.nodes.since(t0).items()
                 if ca.group_of(w_.nodes.last.get(k, {})) == w.group and v["seen"] <= end}
        ready = [v.get("Ready") for v in nodes.values()]
        reqs = w_.requests.since(t0, ns)
        req_first = min((v["seen"] for v in reqs.values()), default=None)
        provisioned = min((v["Provisioned=True"] for v in reqs.values() if "Provisioned=True" in v), default=None)
        group_first = w_.groups.first.get((ns, "g"), {})
        started = len(bound) >= w.size
        view = ca.view(api, spec.namespace).get(w.group)
        return {
            "time s": round(reached, 2) if reached is not None else None,
            "bound": len(bound), "started": started,
            "nodes added": len(nodes),
            "nodes in vain": len(nodes) if not started else 0,
            "nodes without a member": len(set(nodes) - used),
            "autoscaler target": view.target if view else None,
            "request created s": _rel(req_first, t0),
            "provisioned s": _rel(provisioned, t0),
            "requests": len(reqs),
            "first node s": _rel(min((v["seen"] for v in nodes.values()), default=None), t0),
            "nodes ready s": _rel(max(ready), t0) if ready and all(r is not None for r in ready) else None,
            "first release s": _rel(ungated[0], t0) if ungated else None,
            "last release s": _rel(ungated[-1], t0) if len(ungated) >= w.size else None,
            "first bound s": _rel(bound[0], t0) if bound else None,
            "NotProvisioned s": _rel(group_first.get("Provisioning=True/NotProvisioned"), t0),
            "load": load,
            "status": _conditions(w_.groups.last.get((ns, "g"))) if gang else "",
            "request status": "; ".join(_conditions(w_.requests.last.get(k)) for k in reqs),
        }
    finally:
        cb.delete_namespace(api, ns)
        ca.reset(cluster, api, spec, ns)


def measure(spec: ca.AutoscalerSpec, workloads: tuple[Workload, ...], repeats: int, timeout: float,
            cluster: Any = None) -> dict[str, list[dict[str, Any]]]:
    """label -> runs ([{"system", "run", **figures}]), every workload through both systems."""
    out: dict[str, list[dict[str, Any]]] = {w.label(spec): [] for w in workloads}
    with autoscaled_plane(spec, cluster) as c:
        api = cb.api_client(c)
        ca.reset(c, api, spec, None, restart=False)  # a given cluster's last reset restarted it
        with cb.cogate_stack(c, "--provisioning-class", provreq.ATOMIC_CLASS), watches(api) as w_:
            for w in workloads:
                for k in range(1, (repeats if w.fits else 1) + 1):
                    order = SYSTEMS if k % 2 else tuple(reversed(SYSTEMS))  # alternate who goes first
                    for system in order:
                        x = run_once(c, api, w_, spec, w, system, timeout)
                        out[w.label(spec)].append({"system": system, "run": k, **x})
                        cb.log(f"{NAME}: {system}: {w.label(spec)} (run {k}): {x}")
        api.close()
    return out


# ------------------------------------------------------------------ report

def _median(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 2) if xs else None


def _plot(spec: ca.AutoscalerSpec, workloads: tuple[Workload, ...], res: dict[str, list[dict[str, Any]]],
          path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fits = [w for w in workloads if w.fits]
    fig, axes = plt.subplots(1, 2, figsize=(12, 5.6), gridspec_kw={"width_ratios": [2, 1]})
    ax, ax_n = axes
    phases = [("request created s", "request created"), ("provisioned s", "Provisioned=True"),
              ("first node s", "first node seen"), ("nodes ready s", "every node Ready"),
              ("last release s", "released"), ("time s", "every member bound")]
    labels, y, named = [], 0, set()
    for w in fits:
        for r in sorted(res[w.label(spec)], key=lambda r: (r["run"], r["system"])):
            prev = 0.0
            for k, (key, name) in enumerate(phases):
                v = r.get(key)
                if v is None or v < prev:
                    continue
                ax.barh(y, v - prev, left=prev, color=f"C{k}", label=None if name in named else name)
                named.add(name)
                prev = v
            labels.append(f"{w.size}x{w.cpu} CPU run {r['run']} {SYSTEM_TITLE[r['system']]}")
            y += 1
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("s after the first create call")
    ax.set_title("Gangs that fit: where the time goes")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3,
              title="phase ending at the segment's right edge", title_fontsize=7)
    unfit = [w for w in workloads if not w.fits]
    xs = range(len(unfit))
    for k, s in enumerate(SYSTEMS):
        rs = [next(r for r in res[w.label(spec)] if r["system"] == s) for w in unfit]
        bars = ax_n.bar([x + k * 0.4 for x in xs], [r["nodes in vain"] for r in rs], 0.4, label=SYSTEM_TITLE[s])
        for b, r in zip(bars, rs):
            ax_n.text(b.get_x() + b.get_width() / 2, b.get_height(), f"{r['bound']} bound", ha="center",
                      va="bottom", fontsize=7)
    ax_n.set_xticks([x + 0.2 for x in xs], [f"{w.size} x {w.cpu} CPU\nmax {w.max_nodes(spec)}" for w in unfit],
                    fontsize=8)
    ax_n.set_ylabel("nodes added in vain")
    ax_n.set_title("A gang that cannot fit whole")
    ax_n.set_ylim(top=max([1] + [w.max_nodes(spec) for w in unfit]) * 1.25)
    ax_n.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


FIT_COLUMNS = ["workload", "run", "system", "time s", "ratio to alone", "bound", "nodes added",
               "nodes without a member", "request created s", "Provisioned=True s", "first node s",
               "every node Ready s", "first release s", "last release s", "first bound s", "load (1 min)"]
UNFIT_COLUMNS = ["workload", "system", "held s", "nodes added", "nodes in vain", "pods bound",
                 "autoscaler target at the end", "first node s", "PodGroup says why s (NotProvisioned)",
                 "request created s", "load (1 min)"]
PHASES = ("request created s", "provisioned s", "first node s", "nodes ready s", "last release s", "time s")
PHASE_COLUMNS = ["workload", "system", "runs", "request created s", "Provisioned=True s", "first node s",
                 "every node Ready s", "last release s", "every member bound s", "Ready -> bound s"]
SUMMARY_COLUMNS = ["workload", "system", "runs", "median time s", "min s", "max s", "median ratio to alone",
                   "ratios per run", "nodes added per run"]


def report(spec: ca.AutoscalerSpec, workloads: tuple[Workload, ...], res: dict[str, list[dict[str, Any]]],
           out_dir: Path, timeout: float, quick: bool) -> dict[str, Any]:
    fit_rows, unfit_rows, summary, phases, targets, notes = [], [], [], [], [], []
    for w in workloads:
        runs = res[w.label(spec)]
        if w.fits:
            ratios = []
            for k in sorted({r["run"] for r in runs}):
                a = next(r for r in runs if r["run"] == k and r["system"] == "cogate")
                b = next(r for r in runs if r["run"] == k and r["system"] == "alone")
                ratio = cb.ratio(a["time s"], b["time s"]) if a["time s"] and b["time s"] else None
                ratios.append(ratio)
                for x in (a, b):
                    fit_rows.append([w.label(spec), k, SYSTEM_TITLE[x["system"]], x["time s"],
                                     ratio if x is a else (1.0 if b["time s"] else None), f"{x['bound']}/{w.size}",
                                     x["nodes added"], x["nodes without a member"], x["request created s"],
                                     x["provisioned s"], x["first node s"], x["nodes ready s"], x["first release s"],
                                     x["last release s"], x["first bound s"], x["load"]])
            med = {}
            for s in SYSTEMS:
                times = [r["time s"] for r in runs if r["system"] == s and r["time s"] is not None]
                med[s] = _median(times)
                summary.append([w.label(spec), SYSTEM_TITLE[s], len([r for r in runs if r["system"] == s]), med[s],
                                min(times, default=None), max(times, default=None),
                                _median([x for x in ratios if x is not None]) if s == "cogate" else 1.0,
                                ", ".join(str(x) for x in ratios) if s == "cogate" else "",
                                ", ".join(str(r["nodes added"]) for r in runs if r["system"] == s)])
            for s in SYSTEMS:
                mine = [r for r in runs if r["system"] == s]
                meds = [_median([r[k] for r in mine if r[k] is not None]) for k in PHASES]
                gap = _median([r["time s"] - r["nodes ready s"] for r in mine
                               if r["time s"] is not None and r["nodes ready s"] is not None])
                phases.append([w.label(spec), SYSTEM_TITLE[s], len(mine), *meds, gap])
            empty = {s: [r["nodes without a member"] for r in runs if r["system"] == s] for s in SYSTEMS}
            if any(empty["cogate"]) or any(empty["alone"]):
                notes.append(
                    f"{w.label(spec)}: new nodes no member was bound to, per run: cogate {empty['cogate']}, the "
                    f"autoscaler alone {empty['alone']}. The autoscaler adds {w.expected_nodes} nodes for "
                    f"{w.size} x {w.cpu} CPU (its simulated node holds fewer members than a real kwok node, see "
                    "the node-count note); cogate plans the gang on the nodes Ready when it fits and packs them "
                    "(the release names every member's node), kube-scheduler alone binds each pod as nodes come, "
                    "spreading them. On nodes that run kube-proxy the real nodes would hold what the simulation "
                    "says and no system would leave a node empty; with scale-down on the autoscaler removes an "
                    "empty node after --scale-down-unneeded-time (10 min by default).")
            rr = [x for x in ratios if x is not None]
            targets.append(cb.target(
                f"{w.label(spec)}: time from the first create call to every member bound, cogate / autoscaler alone",
                "none (issue 16 sets no time target; the ratio is reported)",
                f"median {_median(rr)}x over {len(ratios)} runs ({', '.join(str(x) for x in ratios)}); medians "
                f"{med['cogate']} s against {med['alone']} s", None))
            missing = [r for r in runs if r["time s"] is None]
            if missing:
                notes.append(f"{w.label(spec)}: {len(missing)} run(s) not bound within {timeout:.0f} s: "
                             + "; ".join(f"{r['system']} run {r['run']}: {r['bound']}/{w.size} bound, "
                                         f"{r['nodes added']} nodes, PodGroup {r['status']}" for r in missing))
        else:
            for x in runs:
                unfit_rows.append([w.label(spec), SYSTEM_TITLE[x["system"]], w.hold_s, x["nodes added"],
                                   x["nodes in vain"], f"{x['bound']}/{w.size}", x["autoscaler target"],
                                   x["first node s"], x["NotProvisioned s"], x["request created s"], x["load"]])
            a = next(r for r in runs if r["system"] == "cogate")
            b = next(r for r in runs if r["system"] == "alone")
            targets.append(cb.target(
                f"{w.label(spec)}: nodes added in vain over {w.hold_s:.0f} s, cogate", "0",
                f"{a['nodes in vain']} (the autoscaler alone: {b['nodes in vain']}, {b['bound']}/{w.size} pods bound)",
                a["nodes in vain"] == 0,
                f"cogate's gang got {a['nodes added']} nodes ({a['bound']}/{w.size} bound); its PodGroup: "
                f"{a['status']}; its request: {a['request status']}"))
            targets.append(cb.target(
                f"{w.label(spec)}: members bound of a gang that cannot start, cogate", "0",
                f"{a['bound']} (the autoscaler alone: {b['bound']}, a partial gang that cannot start)",
                a["bound"] == 0, f"cogate's PodGroup: {a['status']}"))
            notes.append(f"{w.label(spec)}: cogate's PodGroup at the end: {a['status']}; its ProvisioningRequest: "
                         f"{a['request status']}")
    plot = "autoscaler_cluster.png"
    _plot(spec, workloads, res, out_dir / plot)
    notes += [
        f"The machine has {os.cpu_count()} cores shared with other work (other sessions' builds and tests may run "
        "during a run; the 1-minute load average at each run's start is in the tables): the absolute times are "
        "noise, the spread over the repeated runs shows how much.",
        "Node counts: the autoscaler simulates a new 16-CPU node as its template plus a kube-proxy pod of 100m, so "
        "it plans one 8-CPU or 12-CPU pod per new node and two 6-CPU pods; kwok runs no kube-proxy, so the real "
        "nodes have the whole 16 CPU and kube-scheduler (or cogate's pinning) may put two 8-CPU members on one: "
        "'nodes without a member' counts the new nodes no member was bound to (nodes the simulation "
        "needed that the real nodes did not).",
        "Where the time goes (the phase table): with cogate the ProvisioningRequest exists a fraction of a second "
        "after the members and the autoscaler adds the nodes in its next loop; alone, the autoscaler acts on the "
        "pods once kube-scheduler has found them unschedulable, so its first node comes later. After the nodes are "
        "Ready cogate's released members (new to kube-scheduler's queue, pinned) bind within tenths of a second, "
        "while the autoscaler alone's pods wait longer for kube-scheduler to try them again (the 'Ready -> bound' "
        "column; the figures are consistent with kube-scheduler's back-off for pods it found unschedulable, which "
        "this benchmark does not measure itself).",
        "Timeline (s after the first create call, one clock: watches of pods, nodes, ProvisioningRequests and "
        "PodGroups in the benchmark's process): request created = cogate's ProvisioningRequest first seen; "
        "Provisioned=True = its condition first seen; first node / every node Ready = the group's new Nodes first "
        "seen / Ready without the not-ready taint; first / last release = members first seen without scheduling "
        "gates (cogate only); bound = spec.nodeName first seen.",
        "(a) and (b) share one control plane and one cogate (running during (b) but not involved: no pod is "
        "labelled); between runs the namespace is deleted and the autoscaler restarted with no node left and "
        "nothing remembered (cogate.localcluster.autoscaler.reset). The systems alternate which goes first per "
        f"repetition; a fitting gang not bound within {timeout:.0f} s counts as not bound (time None).",
        "raw figures: " + json.dumps(res),
    ]
    return cb.result(
        NAME, TITLE,
        "The real cluster-autoscaler 1.36.1 (kwok provider; node groups of 16-CPU / 64Gi nodes, min 0, scale-down "
        "off, --scan-interval=1s: 'autoscaled' up to 4 nodes, 'wide' up to 8) on one local control plane with no "
        "other node; cogate with --provisioning-class best-effort-atomic-scale-up.autoscaling.x-k8s.io. Each "
        "gang (members selecting their group by nodeSelector, CPU as given, 1Gi each) through (a) cogate (a "
        "PodGroup, minMember = size, members labelled: cogate asks for the whole gang's nodes with one "
        "ProvisioningRequest and releases the gang pinned once they are there) and (b) the autoscaler alone "
        "(the same pods unlabelled), the group reset to no node between runs. Gangs that fit (4 x 6 CPU: 2 new "
        "nodes; 8 x 8 CPU: 8) are run "
        f"{1 if quick else REPEATS} time(s) each: time from the first create call to every member bound, nodes "
        "added, cogate's timeline. A gang that cannot fit whole (5 x 12 CPU, at most 4 nodes) is watched for a "
        "fixed time: nodes added in vain, pods bound, when cogate's PodGroup says why.",
        "the autoscaler alone (b), same workloads, same control plane, alternating with (a); ratios are against "
        "its time in the same repetition.",
        tables=[cb.table("Gangs that fit on new nodes: every run (times in s after the first create call)",
                         FIT_COLUMNS, fit_rows),
                cb.table("Gangs that fit: spread over the runs", SUMMARY_COLUMNS, summary),
                cb.table("Gangs that fit: where the time goes (medians over the runs, s after the first create call; "
                         "the last column: from every new node Ready to every member bound)", PHASE_COLUMNS, phases),
                cb.table("A gang that cannot fit whole, watched for a fixed time", UNFIT_COLUMNS, unfit_rows)],
        plots=[{"file": plot, "caption": "Left: each fitting run's timeline (cogate: request created, "
                                         "Provisioned=True, nodes Ready, released, bound; the autoscaler alone: "
                                         "nodes Ready, bound). Right: nodes added in vain for the gang that cannot "
                                         "fit whole (members bound above each bar)."}],
        targets=targets, notes=notes)


def run(quick: bool, out_dir: Path, cluster: Any = None) -> dict[str, Any]:
    """The benchmark (bench/README.md contract). ``cluster``: an autoscaled LocalCluster to use (its
    autoscaler must have the groups of the spec used: :data:`QUICK_SPEC` with ``quick``, else
    :data:`SPEC`), else one of its own."""
    spec = QUICK_SPEC if quick else SPEC
    workloads = QUICK_WORKLOADS if quick else WORKLOADS
    timeout = 90.0 if quick else 150.0
    res = measure(spec, workloads, 1 if quick else REPEATS, timeout, cluster)
    return report(spec, workloads, res, out_dir, timeout, quick)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    cb.main(run)
