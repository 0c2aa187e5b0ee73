"""Benchmark 3 (issue 10): end to end on the local control plane, gang against kube-scheduler alone.

kwok nodes of 4 CPU, 16Gi, 110 pods. Workloads, each created at once as ReplicaSets of pods of
100m / 64Mi, on two cluster sizes (issue 19: the sparse shape alone hid a dense one's cost):

- 100 nodes: one group of 1,000 pods (one ReplicaSet, 10 members per node), 100 groups of 8
  (100 ReplicaSets created from 16 threads), one group of 3,000 (30 per node);
- 29 nodes: one group of 1,000 (about 35 per node), 100 groups of 8.

With cogate each ReplicaSet is a PodGroup (created first, minMember = replicas) and its pods
carry the group label: the webhook gates them and the controller releases them. Baseline,
same run, same cluster, cogate running: the same ReplicaSets without the label (kube-scheduler
alone). Time = first create call -> the pod watch sees the last pod bound (one clock). Each
run gets its own namespace, deleted (and its pods gone) before the next.

Timeline of each cogate run, in seconds after the pod watch saw the last member created:
the controller's members informer has them all (its ``informer_events_total{informer="members",
type="ADDED"}`` polled every 0.1 s), the decision is in status (a PodGroup watch sees
``scheduleStartTime`` of the last group), the first and the last gate removed, the last member
bound (the pod watch).

    python bench/bench_end_to_end.py [--quick] [--shapes 29x1x1000,100x100x8] [--profile] [--no-dry-runs]

prints RESULT <json>; ``--profile`` records the controller with py-spy during each cogate run
(raw stacks in the output directory, a summary in the notes).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from kubernetes import client

sys.path.insert(0, str(Path(__file__).resolve().parent))
import clusterbench as cb  # noqa: E402
import _profile  # noqa: E402

NAME = "end_to_end"
TITLE = "End to end: gangs against kube-scheduler alone"
NEEDS_CLUSTER = True
NODE_SHAPE = {"cpu": "4", "memory": "16Gi", "pods": 110}
TARGET = 1.25


#: (nodes, groups, members per group); the first two are issue 10's targets, the rest issue 19's
#: dense shapes. ``--quick``: :data:`QUICK_SHAPES`.
SHAPES = ((100, 1, 1000), (100, 100, 8), (100, 1, 3000), (29, 1, 1000), (29, 100, 8))
QUICK_SHAPES = ((10, 1, 8), (10, 2, 4), (3, 1, 30))
#: Shapes with a target (issue 10) and whose runs are repeated with every release dry-run first.
TARGET_SHAPES = ((100, 1, 1000), (100, 100, 8))
QUICK_TARGET_SHAPES = ((10, 1, 8), (10, 2, 4))
#: More py-spy flags for ``--profile`` (``COGATE_BENCH_PYSPY="--gil"``: who holds the GIL).
PYSPY_EXTRA = tuple(os.environ.get("COGATE_BENCH_PYSPY", "").split())
#: Requests whose mean time in kube-apiserver each run reports (``clusterbench.apiserver_latency``).
LATENCY_KEYS = ("POST pods", "PATCH pods", "POST pods/binding", "PATCH pods/status", "PATCH podgroups/status")
#: The members informer's ADDED events, polled from the controller's /metrics (the timeline).
MEMBERS_ADDED = ("cogate_controller_informer_events_total", 'informer="members",type="ADDED"')


def _label(groups: int, size: int) -> str:
    return f"1 group of {size:,}" if groups == 1 else f"{groups} groups of {size:,}"


def _shape_label(shape: tuple[int, int, int]) -> str:
    nodes, groups, size = shape
    return f"{_label(groups, size)} on {nodes} nodes"


def parse_shapes(text: str) -> tuple[tuple[int, int, int], ...]:
    """``"29x1x1000,100x100x8"`` -> ((29, 1, 1000), (100, 100, 8)) (nodes x groups x members)."""
    out = []
    for part in text.split(","):
        nodes, groups, size = (int(x) for x in part.strip().split("x"))
        out.append((nodes, groups, size))
    return tuple(out)


def run_once(api, watch: cb.PodWatch, stack, groups: int, size: int, gang: bool, timeout: float,
             cluster: Any = None, pg_watch: cb.PodGroupWatch | None = None,
             profile_to: Path | None = None, pre_gate: str | None = None) -> dict[str, Any]:
    """One run: ``groups`` ReplicaSets of ``size`` created at once (``gang``: labelled, each with its
    PodGroup of minMember ``size``; ``pre_gate``: their pod templates carry that scheduling gate, so the
    webhook's match condition skips the members) until every pod is bound or ``timeout`` seconds
    pass (``TimeoutError``). Returns the run's figures (seconds from the first create call)."""
    before = cb.controller_stats(stack)
    clock = cb.MetricClock(stack, {"members added": MEMBERS_ADDED}) if gang else None
    spy = None
    cpu_before = cb.cpu_seconds(cluster, stack) if cluster is not None else {}
    req_before = cb.apiserver_requests(api)
    lat_before = cb.apiserver_latency(api)
    ns = cb.new_namespace(api, "e2e-gang" if gang else "e2e-plain")
    total = groups * size
    try:
        names = [f"g{i}" for i in range(groups)]
        if gang:
            cb.parallel(lambda n: cb.create_pod_group(api, ns, cb.pod_group(n, size)), names)
        with clock if clock is not None else contextlib.nullcontext():
            if clock is not None:
                cb.wait_for(lambda: clock.samples["members added"], 10, "a first poll of the controller's metrics")
                added_before = clock.value("members added")
                clock.stop_when("members added", added_before + total)
            if profile_to is not None:
                spy = _profile.pyspy_record(cb.controller_pid(stack), timeout, str(profile_to), rate=100,
                                            threads=True, extra=PYSPY_EXTRA)
            t0 = time.monotonic()
            cb.parallel(lambda n: cb.create_replica_set(api, ns, cb.pre_gated(
                cb.replica_set(n, size, group=n if gang else None), pre_gate)), names)
            end = watch.wait_bound(ns, total, timeout)
            if spy is not None:
                spy.send_signal(signal.SIGINT)  # py-spy writes what it sampled so far
                spy.wait(30)
        ps = watch.pods(ns)
        last_created = max(p.created for p in ps)
        first_bound = min(p.bound for p in ps if p.bound is not None)
        out = {"all bound s": end - t0, "all created s": last_created - t0,
               "last created -> all bound s": end - last_created, "first bound s": first_bound - t0}
        if gang:
            ung = [p.ungated for p in ps if p.ungated is not None]
            out["last created -> last ungated s"] = max(ung) - last_created
            seen = clock.first_at("members added", added_before + total) if clock is not None else None
            decided = pg_watch.decided_at(ns, names) if pg_watch is not None else []
            out["timeline"] = {
                "last seen by informer": None if seen is None else seen - last_created,
                "decision recorded": max(decided) - last_created if len(decided) == groups else None,
                "first gate removed": min(ung) - last_created,
                "last gate removed": max(ung) - last_created,
                "last bound": end - last_created,
            }
            out["per group"] = per_group(ps, pg_watch, ns, names)
        out["controller"] = cb.stats_delta(before, cb.controller_stats(stack))
        if cluster is not None:
            cpu = cb.stats_delta(cpu_before, cb.cpu_seconds(cluster, stack))
            out["cpu s"] = {k: round(v, 1) for k, v in sorted(cpu.items(), key=lambda kv: -kv[1]) if v >= 0.05}
        out["pod writes"] = cb.pod_writes(cb.stats_delta(req_before, cb.apiserver_requests(api)))
        out["apiserver ms"] = cb.latency_delta(lat_before, cb.apiserver_latency(api), LATENCY_KEYS)
        out["FailedScheduling events"] = len(json.loads(client.CoreV1Api(api).list_namespaced_event(
            ns, field_selector="reason=FailedScheduling", _preload_content=False).data).get("items") or [])
        return out
    finally:
        if spy is not None and spy.poll() is None:
            spy.kill()
        cb.delete_namespace(api, ns)


def per_group(ps: list[cb.PodRecord], pg_watch: cb.PodGroupWatch | None, namespace: str,
              names: list[str]) -> dict[str, dict[str, float]]:
    """Each group's own path, from its last member's creation (as the pod watch saw it) to its decision
    recorded (``PodGroupWatch``), its last gate removed and its last member bound: the median, 90th
    percentile and maximum over the groups, in seconds (groups a step was not seen for left out)."""
    by: dict[str | None, list[cb.PodRecord]] = {}
    for p in ps:
        by.setdefault(p.group, []).append(p)
    steps: dict[str, list[float]] = {"decision recorded": [], "last gate removed": [], "last bound": []}
    for name in names:
        members = by.get(name) or []
        if not members:
            continue
        last = max(p.created for p in members)
        decided = pg_watch.decided_at(namespace, [name]) if pg_watch is not None else []
        ungated = [p.ungated for p in members if p.ungated is not None]
        bound = [p.bound for p in members if p.bound is not None]
        for step, t in (("decision recorded", decided[0] if decided else None),
                        ("last gate removed", max(ungated) if len(ungated) == len(members) else None),
                        ("last bound", max(bound) if len(bound) == len(members) else None)):
            if t is not None:
                steps[step].append(t - last)
    return {step: {"p50": round(cb.percentile(xs, 50), 3), "p90": round(cb.percentile(xs, 90), 3),
                   "max": round(max(xs), 3)} for step, xs in steps.items() if xs}


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
            f"in planning. Timeline after the last member's creation: {_timeline_text(gang)}. "
            "The extra time is the API server's extra work per member (the release patch and the "
            "PodGroup status writes; the webhook call at creation) on a machine whose 2 cores the control plane "
            "already fills, and kube-scheduler binds a member only after its release instead of while the others "
            "are still being created." + _made_again(gang, total))


def _made_again(gang: dict[str, Any], total: int) -> str:
    """A sentence when the cogate run created more pods than members (members deleted during the run
    and made again by their ReplicaSet: issue 29, a pinned node briefly NotReady), else ''."""
    extra = int(gang.get("pod writes", {}).get("POST pods", 0)) - total
    if extra <= 0:
        return ""
    return (f" {extra} pods more than the {total:,} members were created ({gang.get('FailedScheduling events')} "
            "FailedScheduling events): members were deleted during the run and made again by their ReplicaSet, "
            "which waited gated again; the controller's PlannedNodeUnusable events and log say which and why.")


def _timeline_text(gang: dict[str, Any]) -> str:
    """The timeline of a cogate run and the release patches' pace, in words (issue 19)."""
    tl = gang.get("timeline") or {}

    def at(key: str) -> str:
        v = tl.get(key)
        return "?" if v is None else f"{v:.2f} s"
    patch = (gang.get("apiserver ms") or {}).get("PATCH pods")
    span = (tl.get("last gate removed") or 0) - (tl.get("first gate removed") or 0)
    rate = f"{gang['controller']['gates removed'] / span:.0f} gates/s" if span > 0 else "?"
    return (f"the informer had every member at {at('last seen by informer')}, the decision was in status at "
            f"{at('decision recorded')}, the gates went from {at('first gate removed')} to "
            f"{at('last gate removed')} ({rate}; kube-apiserver's mean time per PATCH pods "
            f"{patch[1] if patch else '?'} ms), the last member was bound at {at('last bound')}")


def _workers(controller_args: tuple[str, ...]) -> int:
    """Gate-removal requests in flight of the controller under ``controller_args``."""
    from cogate.controller import main as controller_main
    return controller_main.build_parser().parse_args(["controller", *controller_args][1:]).workers


def _rate(count: float, seconds: float | None) -> str:
    return f"{count / seconds:.0f}/s" if seconds and seconds > 0 else "?"


def _bounds(label: str, base: dict[str, Any], gang: dict[str, Any], total: int, workers: int) -> str:
    """What bounds a cogate run after its decision (issue 19), from this run's figures: the
    release patches' pace against what ``workers`` requests in flight allow at kube-apiserver's
    mean time per PATCH pods, and kube-scheduler's binding rate with cogate (members bound per
    second from the first gate removed) against alone (pods per second from its first bind).
    The verdicts in the text follow the figures: the release is "bound by the API server's write
    time" when it ran at >= 70% of ``workers`` / mean PATCH time."""
    tl = gang["timeline"]
    first, last = tl.get("first gate removed") or 0.0, tl.get("last gate removed") or 0.0
    span = last - first
    ms = gang.get("apiserver ms") or {}
    patch, bind_g = ms.get("PATCH pods"), ms.get("POST pods/binding")
    bind_b = (base.get("apiserver ms") or {}).get("POST pods/binding")
    most = workers / (patch[1] / 1000) if patch and patch[1] > 0 else None
    if most is None or span <= 0:
        release = "its pace is unknown"
    elif total / span >= 0.7 * most:
        release = f"near the at most {most:.0f}/s that allows: the API server's write time bounds the release"
    else:
        release = f"below the {most:.0f}/s that allows: not the API server's write time alone"
    binding_tail = tl["last bound"] - last
    rest = ("kube-scheduler's binding" if binding_tail >= span else "the release patches")
    return (f"{label}, what bounds the rest: the decision was in status {tl.get('decision recorded') or 0:.2f} s "
            f"after the last member's creation; the {total:,} release patches then took {span:.2f} s "
            f"({_rate(total, span)}), {workers} in flight at kube-apiserver's mean "
            f"{patch[1] if patch else '?'} ms per PATCH pods, {release}. kube-scheduler bound the members at "
            f"{_rate(total, tl['last bound'] - first)} from the first gate removed (POST pods/binding mean "
            f"{bind_g[1] if bind_g else '?'} ms) against {_rate(total, base['all bound s'] - base['first bound s'])} "
            f"alone from its first bind (mean {bind_b[1] if bind_b else '?'} ms); the last member was bound "
            f"{binding_tail:.2f} s after the last gate, so the larger part after the decision is {rest}. "
            f"Limit for a gang (all members exist, then kube-scheduler alone's binding time): "
            f"{gang['all created s'] + base['all bound s']:.1f} s; cogate {gang['all bound s']:.1f} s.")


def _timeline_row(label: str, base: dict[str, Any], gang: dict[str, Any]) -> list[Any]:
    tl = gang["timeline"]

    def r(v: float | None) -> float | None:
        return None if v is None else round(v, 2)
    limit = gang["all created s"] + base["all bound s"]
    return [label, r(gang["all created s"]), r(tl["last seen by informer"]), r(tl["decision recorded"]),
            r(tl["first gate removed"]), r(tl["last gate removed"]), r(tl["last bound"]),
            round(gang["all bound s"], 2), round(base["all bound s"], 2),
            cb.ratio(gang["all bound s"], base["all bound s"]), cb.ratio(limit, base["all bound s"])]


def run(quick: bool, out_dir: Path, cluster: Any = None, shapes: tuple[tuple[int, int, int], ...] | None = None,
        profile: bool = False, dry_runs: bool = True, controller_args: tuple[str, ...] = ()) -> dict[str, Any]:
    shapes = shapes or (QUICK_SHAPES if quick else SHAPES)
    target_shapes = QUICK_TARGET_SHAPES if quick else TARGET_SHAPES
    timeout = 60 if quick else 600
    rows, targets, notes, cost_rows, timeline_rows = [], [], [], [], []
    runs: dict[tuple[int, int, int], tuple[dict[str, Any], dict[str, Any]]] = {}
    by_nodes: dict[int, list[tuple[int, int, int]]] = {}
    workers = _workers(controller_args)
    for sh in shapes:
        by_nodes.setdefault(sh[0], []).append(sh)
    with cb.control_plane(cluster) as c:
        api = cb.api_client(c)
        for nodes, node_shapes in by_nodes.items():
            cb.log(f"{NAME}: {nodes} nodes")
            cb.set_nodes(c, nodes, **NODE_SHAPE)
            with cb.cogate_stack(c, *controller_args) as stack, cb.PodWatch(api) as watch, \
                    cb.PodGroupWatch(api) as pg_watch:
                for sh in node_shapes:
                    _, groups, size = sh
                    label = _shape_label(sh)
                    cb.log(f"{NAME}: {label}: kube-scheduler alone")
                    base = run_once(api, watch, stack, groups, size, False, timeout, c)
                    cb.log(f"{NAME}: {label}: cogate")
                    raw = out_dir / f"end_to_end_profile_{nodes}x{groups}x{size}.txt" if profile else None
                    gang = run_once(api, watch, stack, groups, size, True, timeout, c, pg_watch, raw)
                    runs[sh] = (base, gang)
                    r = cb.ratio(gang["all bound s"], base["all bound s"])
                    rows.append([label, groups * size, round(base["all bound s"], 2), round(gang["all bound s"], 2), r,
                                 round(base["all created s"], 2), round(gang["all created s"], 2),
                                 round(gang["last created -> last ungated s"], 2),
                                 round(gang["last created -> all bound s"], 2)])
                    timeline_rows.append(_timeline_row(label, base, gang))
                    if sh in target_shapes:
                        targets.append(cb.target(f"{_label(groups, size)} on {nodes} kwok nodes: time until all "
                                                 "bound, cogate / kube-scheduler alone", f"<= {TARGET}x",
                                                 f"{r}x ({gang['all bound s']:.1f} s vs {base['all bound s']:.1f} s)",
                                                 r is not None and r <= TARGET, _explain(base, gang, groups * size)))
                    cb.log(f"{NAME}: {label}: {base} / {gang}")
                    notes.append(_bounds(label, base, gang, groups * size, workers))
                    notes.append(f"{label}, controller during the cogate run: {gang['controller']}; during the "
                                 f"kube-scheduler-alone run: {base['controller']}; mean time in kube-apiserver per "
                                 f"request (requests, ms): cogate {gang['apiserver ms']}, alone {base['apiserver ms']}; "
                                 f"FailedScheduling events: cogate {gang['FailedScheduling events']}, alone "
                                 f"{base['FailedScheduling events']}")
                    if raw is not None and raw.exists():
                        notes.append(f"{label}, controller profile during the cogate run ({raw.name}): "
                                     + _profile.pyspy_text(_profile.pyspy_summary(str(raw))))
            # The same gangs with every release patch dry-run first (--validate-releases=always, what
            # the default "auto" does on a cluster where a webhook or policy intercepts pod updates).
            dry = [sh for sh in node_shapes if sh in target_shapes] if dry_runs else []
            if not dry:
                continue
            with cb.cogate_stack(c, *controller_args, "--validate-releases=always") as stack, cb.PodWatch(api) as watch:
                for sh in dry:
                    _, groups, size = sh
                    label = _shape_label(sh)
                    cb.log(f"{NAME}: {label}: cogate --validate-releases=always")
                    always = run_once(api, watch, stack, groups, size, True, timeout, c)
                    base, gang = runs[sh]
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
    tables = [cb.table("Time until all pods are bound (seconds)",
                       ["workload", "pods", "kube-scheduler alone s", "cogate s", "ratio", "alone: all created s",
                        "cogate: all created s", "cogate: last created -> last ungated s",
                        "cogate: last created -> all bound s"], rows),
              cb.table("Timeline of each cogate run: seconds after the pod watch saw the last member created (all "
                       "created: after the first create call). Informer: the controller's members informer has "
                       "every member (its watch-event counter, polled every 0.1 s); decision: a PodGroup watch sees "
                       "scheduleStartTime of the last group; gates and binding: the pod watch. Limit ratio: (all "
                       "created + kube-scheduler alone's all bound) / kube-scheduler alone's all bound",
                       ["workload", "all created s", "informer has all s", "decision recorded s",
                        "first gate removed s", "last gate removed s", "last bound s", "cogate all bound s",
                        "alone all bound s", "ratio", "limit ratio"], timeline_rows)]
    if cost_rows:
        tables.append(cb.table(
            "Where the time goes: writes to pods and PodGroups per pod (the API server's "
            "apiserver_request_total) and CPU seconds of all processes (control plane, kwok, cogate), "
            "and the same gangs with every release patch dry-run first (--validate-releases=always: "
            "what the default auto does while an admission webhook or policy intercepts pod updates; "
            "none does here)",
            ["workload", "alone s", "cogate s", "cogate, dry runs s", "ratio", "ratio, dry runs",
             "alone writes/pod", "cogate writes/pod", "dry runs writes/pod", "alone CPU s",
             "cogate CPU s", "dry runs CPU s"], cost_rows))
    node_counts = ", ".join(str(n) for n in by_nodes)
    return cb.result(
        NAME, TITLE,
        f"kwok nodes ({NODE_SHAPE['cpu']} CPU, {NODE_SHAPE['memory']}, {NODE_SHAPE['pods']} pods; {node_counts} of "
        "them). Each workload is created at once as ReplicaSets of pods of 100m/64Mi; with cogate each ReplicaSet "
        "is a PodGroup (created first, minMember = replicas) whose pods the webhook gates and the controller "
        "releases. Time from the first create call until a pod watch sees the last pod bound (one clock).",
        "The same ReplicaSets without the PodGroup label, same run, same cluster (kube-scheduler alone; cogate "
        "running but not involved)." + (f" Controller flags: {' '.join(controller_args)}." if controller_args else ""),
        tables=tables, targets=targets or [cb.target("(no shape with a target was run)", "-", "-", True)],
        notes=notes)


def main(argv: list[str] | None = None) -> None:
    import argparse
    import tempfile

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes: smoke-test the harness")
    ap.add_argument("--out-dir", type=Path, default=None, help="where plots and profiles go (default: a temp dir)")
    ap.add_argument("--shapes", type=parse_shapes, default=None,
                    help="NODESxGROUPSxMEMBERS,... (default: every shape of SHAPES)")
    ap.add_argument("--profile", action="store_true", help="py-spy the controller during each cogate run")
    ap.add_argument("--no-dry-runs", dest="dry_runs", action="store_false",
                    help="skip the runs with --validate-releases=always")
    ap.add_argument("--controller-args", default="", metavar="ARGS",
                    help="more flags of cogate's controller, space-separated (e.g. '--workers=32')")
    args = ap.parse_args(argv)
    out = args.out_dir or Path(tempfile.mkdtemp(prefix="cogate-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    res = run(args.quick, out, shapes=args.shapes, profile=args.profile, dry_runs=args.dry_runs,
              controller_args=tuple(args.controller_args.split()))
    print("RESULT " + json.dumps(res))


if __name__ == "__main__":
    main()
