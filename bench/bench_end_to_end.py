"""Benchmark 3 (issue 10): end to end on the local control plane, gang against kube-scheduler alone.

100 kwok nodes (4 CPU, 16Gi, 110 pods). Two workloads, each created at once as ReplicaSets
of pods of 100m / 64Mi: one group of 1,000 pods (one ReplicaSet), and 100 groups of 8 (100
ReplicaSets created from 16 threads). With cogate each ReplicaSet is a PodGroup (created
first, minMember = replicas) and its pods carry the group label: the webhook gates them and
the controller releases them. Baseline, same run, same cluster, cogate running: the same
ReplicaSets without the label (kube-scheduler alone). Time = first create call -> the pod
watch sees the last pod bound (one clock). Each run gets its own namespace, deleted (and its
pods gone) before the next.

    python bench/bench_end_to_end.py [--quick]       # prints RESULT <json>
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import clusterbench as cb  # noqa: E402

NAME = "end_to_end"
TITLE = "End to end: gangs against kube-scheduler alone"
NEEDS_CLUSTER = True
NODE_SHAPE = {"cpu": "4", "memory": "16Gi", "pods": 110}
TARGET = 1.25


def _workloads(quick: bool) -> list[tuple[str, int, int]]:
    """(label, groups, members per group)."""
    if quick:
        return [("1 group of 8", 1, 8), ("2 groups of 4", 2, 4)]
    return [("1 group of 1,000", 1, 1000), ("100 groups of 8", 100, 8)]


def run_once(api, watch: cb.PodWatch, stack, groups: int, size: int, gang: bool, timeout: float,
             cluster: Any = None) -> dict[str, Any]:
    before = cb.controller_stats(stack)
    cpu_before = cb.cpu_seconds(cluster, stack) if cluster is not None else {}
    req_before = cb.apiserver_requests(api)
    ns = cb.new_namespace(api, "e2e-gang" if gang else "e2e-plain")
    total = groups * size
    try:
        names = [f"g{i}" for i in range(groups)]
        if gang:
            cb.parallel(lambda n: cb.create_pod_group(api, ns, cb.pod_group(n, size)), names)
        t0 = time.monotonic()
        cb.parallel(lambda n: cb.create_replica_set(api, ns, cb.replica_set(n, size, group=n if gang else None)),
                    names)
        end = watch.wait_bound(ns, total, timeout)
        ps = watch.pods(ns)
        last_created = max(p.created for p in ps)
        first_bound = min(p.bound for p in ps if p.bound is not None)
        out = {"all bound s": end - t0, "all created s": last_created - t0,
               "last created -> all bound s": end - last_created, "first bound s": first_bound - t0}
        if gang:
            ung = [p.ungated for p in ps if p.ungated is not None]
            out["last created -> last ungated s"] = max(ung) - last_created
        out["controller"] = cb.stats_delta(before, cb.controller_stats(stack))
        if cluster is not None:
            cpu = cb.stats_delta(cpu_before, cb.cpu_seconds(cluster, stack))
            out["cpu s"] = {k: round(v, 1) for k, v in sorted(cpu.items(), key=lambda kv: -kv[1]) if v >= 0.05}
        out["pod writes"] = cb.pod_writes(cb.stats_delta(req_before, cb.apiserver_requests(api)))
        return out
    finally:
        cb.delete_namespace(api, ns)


def _writes(r: dict[str, Any]) -> float:
    """Writes to pods and PodGroups in run ``r`` (``clusterbench.pod_writes`` holds writes only)."""
    return sum(r.get("pod writes", {}).values())


def _explain(base: dict[str, Any], gang: dict[str, Any], total: int) -> str:
    """Where the extra time goes, from this run's figures: the API server's requests and every
    process's CPU time (``/proc``) in both runs, the controller's counters and the watch's times."""
    st = gang["controller"]
    release_s = gang["last created -> last ungated s"]
    removed = st["gates removed"]
    cpu_b, cpu_g = base.get("cpu s", {}), gang.get("cpu s", {})
    busy_b, busy_g = sum(cpu_b.values()), sum(cpu_g.values())
    return (f"All members existed after {gang['all created s']:.1f} s (kube-scheduler alone: all pods existed after "
            f"{base['all created s']:.1f} s and were bound after {base['all bound s']:.1f} s). From the last member's "
            f"creation to the last gate removed took {release_s:.1f} s ({removed:.0f} gates removed, "
            f"{removed / release_s if release_s > 0 else float('nan'):.0f}/s). Writes to pods and PodGroups: "
            f"{_writes(gang) / total:.2f} per pod with cogate against {_writes(base) / total:.2f} alone "
            f"({gang.get('pod writes')} against {base.get('pod writes')}). CPU time of all processes: "
            f"{busy_g:.0f} s with cogate against {busy_b:.0f} s alone on 2 cores ({cpu_g} against {cpu_b}); "
            f"the controller spent {st['pass s']:.1f} s in {st['passes']:.0f} passes, of which {st['planner s']:.2f} s "
            "in planning. The extra time is the API server's extra work per member (the release patch and the "
            "PodGroup status writes; the webhook call at creation) on a machine whose 2 cores the control plane "
            "already fills, and kube-scheduler binds a member only after its release instead of while the others "
            "are still being created.")


def run(quick: bool, out_dir: Path, cluster: Any = None) -> dict[str, Any]:
    nodes = 10 if quick else 100
    timeout = 60 if quick else 600
    rows, targets, notes, cost_rows = [], [], [], []
    runs: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    with cb.control_plane(cluster) as c:
        cb.log(f"{NAME}: {nodes} nodes")
        cb.set_nodes(c, nodes, **NODE_SHAPE)
        api = cb.api_client(c)
        with cb.cogate_stack(c) as stack:
            with cb.PodWatch(api) as watch:
                for label, groups, size in _workloads(quick):
                    cb.log(f"{NAME}: {label}: kube-scheduler alone")
                    base = run_once(api, watch, stack, groups, size, False, timeout, c)
                    cb.log(f"{NAME}: {label}: cogate")
                    gang = run_once(api, watch, stack, groups, size, True, timeout, c)
                    runs[label] = (base, gang)
                    r = cb.ratio(gang["all bound s"], base["all bound s"])
                    rows.append([label, groups * size, round(base["all bound s"], 2), round(gang["all bound s"], 2), r,
                                 round(base["all created s"], 2), round(gang["all created s"], 2),
                                 round(gang["last created -> last ungated s"], 2),
                                 round(gang["last created -> all bound s"], 2)])
                    targets.append(cb.target(f"{label} on {nodes} kwok nodes: time until all bound, cogate / "
                                             "kube-scheduler alone", f"<= {TARGET}x",
                                             f"{r}x ({gang['all bound s']:.1f} s vs {base['all bound s']:.1f} s)",
                                             r is not None and r <= TARGET, _explain(base, gang, groups * size)))
                    cb.log(f"{NAME}: {label}: {base} / {gang}")
                    notes.append(f"{label}, controller during the cogate run: {gang['controller']}; during the "
                                 f"kube-scheduler-alone run: {base['controller']}")
        # The same gangs with every release patch dry-run first (--validate-releases=always, what
        # the default "auto" does on a cluster where a webhook or policy intercepts pod updates).
        with cb.cogate_stack(c, "--validate-releases=always") as stack:
            with cb.PodWatch(api) as watch:
                for label, groups, size in _workloads(quick):
                    cb.log(f"{NAME}: {label}: cogate --validate-releases=always")
                    always = run_once(api, watch, stack, groups, size, True, timeout, c)
                    base, gang = runs[label]
                    cost_rows.append([label, round(base["all bound s"], 2), round(gang["all bound s"], 2),
                                      round(always["all bound s"], 2), cb.ratio(gang["all bound s"], base["all bound s"]),
                                      cb.ratio(always["all bound s"], base["all bound s"]),
                                      round(_writes(base) / (groups * size), 2), round(_writes(gang) / (groups * size), 2),
                                      round(_writes(always) / (groups * size), 2),
                                      round(sum(base.get("cpu s", {}).values())),
                                      round(sum(gang.get("cpu s", {}).values())),
                                      round(sum(always.get("cpu s", {}).values()))])
                    cb.log(f"{NAME}: {label}: --validate-releases=always: {always}")
                    notes.append(f"{label}: API requests (writes to pods and PodGroups) with cogate "
                                 f"{gang.get('pod writes')}, with every release dry-run first "
                                 f"{always.get('pod writes')}, kube-scheduler alone {base.get('pod writes')}; CPU "
                                 f"seconds per process: cogate {gang.get('cpu s')}, with dry runs "
                                 f"{always.get('cpu s')}, alone {base.get('cpu s')}")
        api.close()
    return cb.result(
        NAME, TITLE,
        f"{nodes} kwok nodes ({NODE_SHAPE['cpu']} CPU, {NODE_SHAPE['memory']}, {NODE_SHAPE['pods']} pods). Each workload "
        "is created at once as ReplicaSets of pods of 100m/64Mi; with cogate each ReplicaSet is a PodGroup (created "
        "first, minMember = replicas) whose pods the webhook gates and the controller releases. Time from the first "
        "create call until a pod watch sees the last pod bound (one clock).",
        "The same ReplicaSets without the PodGroup label, same run, same cluster (kube-scheduler alone; cogate "
        "running but not involved).",
        tables=[cb.table("Time until all pods are bound (seconds)",
                         ["workload", "pods", "kube-scheduler alone s", "cogate s", "ratio", "alone: all created s",
                          "cogate: all created s", "cogate: last created -> last ungated s",
                          "cogate: last created -> all bound s"], rows),
                cb.table("Where the time goes: writes to pods and PodGroups per pod (the API server's "
                         "apiserver_request_total) and CPU seconds of all processes (control plane, kwok, cogate), "
                         "and the same gangs with every release patch dry-run first (--validate-releases=always: "
                         "what the default auto does while an admission webhook or policy intercepts pod updates; "
                         "none does here)",
                         ["workload", "alone s", "cogate s", "cogate, dry runs s", "ratio", "ratio, dry runs",
                          "alone writes/pod", "cogate writes/pod", "dry runs writes/pod", "alone CPU s",
                          "cogate CPU s", "dry runs CPU s"], cost_rows)],
        targets=targets, notes=notes)


if __name__ == "__main__":
    cb.main(run)
