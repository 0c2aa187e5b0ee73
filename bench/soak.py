"""The chaos soak (issue 35): gangs keep their promise while the control plane, cogate and the
nodes fail at random.

    make soak SOAK_MINUTES=30 SOAK_SEED=1          # -> docs/benchmarks/results/soak.json, docs/benchmarks.md
    make soak SOAK_MINUTES=10 SOAK_SEED="1 2 3"    # three seeds, one after the other
    .venv/bin/python bench/soak.py --minutes 3 --seed 7 --out-dir /tmp/soak   # one run, its report printed

One run (:func:`run_soak`): a local control plane (etcd, kube-apiserver, kube-scheduler,
kube-controller-manager, kwok, and the real cluster-autoscaler with one tainted node group,
:func:`autoscaler_spec`) with ``nodes`` kwok nodes of 8 CPU; cogate's webhook and two
controller replicas with leader election on (:class:`soak_faults.Supervisor`), the replicas
talking to kube-apiserver through a faulty proxy (:mod:`soak_proxy`); a seeded stream of
workloads of every kind (:mod:`soak_workloads`); two seeded fault injectors
(:mod:`soak_faults`); a recorder of every pod, PodGroup and node change (:mod:`soak_record`);
the invariants (:mod:`soak_invariants`) checked over that log every ``check_every`` seconds and
at the end. After ``minutes`` the faults and the stream stop, every process is back, and each
PodGroup's status must match its members within the ``converge`` bound; then the report:
the seed, faults by kind, gangs started, time from fault to recovery (a canary gang bound,
p50/p99), every violation with the event log around it, a plot of gangs waiting and faults over
time. A run replays from its seed: the workload and fault schedules are drawn from it (what the
cluster does in between is not deterministic, so a replay reproduces the schedule, not every
interleaving).

As a benchmark module (``bench/run.py --only soak``): ``run(quick, out_dir)`` runs the seeds of
``$SOAK_SEED`` (default 1) for ``$SOAK_MINUTES`` (default 10, ``make soak``'s 30; ``quick``: 2) each.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from kubernetes import client  # noqa: E402

from cogate.api import DEFAULT_GATE_NAME, GROUP, PLURAL, POD_GROUP_LABEL, VERSION  # noqa: E402
from cogate.certs import pki  # noqa: E402
from cogate.localcluster import nodes as fake_nodes  # noqa: E402
from cogate.localcluster.procs import rss_bytes  # noqa: E402
from cogate.localcluster.stack import CogateStack  # noqa: E402

import clusterbench as cb  # noqa: E402
import soak_invariants as inv  # noqa: E402
from soak_faults import CONTROLLERS, OTHER_FAULTS, PROCESS_FAULTS, Chaos, Injector, Supervisor  # noqa: E402
from soak_proxy import FaultyProxy  # noqa: E402
from soak_record import Recorder  # noqa: E402
from soak_workloads import PRIORITIES, Workloads  # noqa: E402

NEEDS_CLUSTER = True
NODE_SHAPE = {"cpu": "8", "memory": "32Gi", "kwok_taint": False, "labels": {"cogate-soak": "node"}}
NAMESPACES = ("soak-a", "soak-b", "soak-c", "soak-canary")
#: The ProvisioningRequest class the controllers ask cluster-autoscaler with (docs/semantics.md).
PROVISIONING_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"


def autoscaler_spec() -> Any:
    """The real cluster-autoscaler's one node group, the ``scale-up`` gangs' pool (:mod:`soak_workloads`): 0 to
    4 kwok nodes of 8 CPU labelled and tainted ``cogate-soak=scaled``; nodes unneeded for 60 s are removed
    (60 s after a scale-up at the earliest), so later gangs ask again or take what is left."""
    from cogate.localcluster.autoscaler import AutoscalerSpec, NodeGroup

    from soak_workloads import POOL_KEY, SCALED
    group = NodeGroup("soak-scaled", cpu=8000, memory=32 * 2**30, labels={POOL_KEY: SCALED},
                      taints=({"key": POOL_KEY, "value": SCALED, "effect": "NoSchedule"},), max=4)
    return AutoscalerSpec(groups=(group,), scan_interval=2.0, scale_down_unneeded_time=60.0,
                          scale_down_delay_after_add=60.0)


def _proxy_kubeconfig(workdir: Path, port: int, ca: Path) -> Path:
    path = workdir / "proxy.kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "soak",
        "clusters": [{"name": "soak", "cluster": {"server": f"https://127.0.0.1:{port}", "certificate-authority": str(ca)}}],
        "users": [{"name": "soak", "user": {}}],
        "contexts": [{"name": "soak", "context": {"cluster": "soak", "user": "soak"}}]}))
    return path


def _start_proxy(cluster: Any, workdir: Path, seed: int) -> FaultyProxy:
    ca_cert, ca_key = pki.new_ca("cogate-soak-proxy-ca")
    cert, key = pki.issue(ca_cert, ca_key, "soak-proxy", dns_names=("localhost",), ip_addresses=("127.0.0.1",),
                          server=True)
    for name, obj in (("proxy-ca.crt", ca_cert), ("proxy.crt", cert), ("proxy.key", key)):
        pki.write_pem(workdir / name, obj)
    pk = Path(cluster.ca_file).parent
    return FaultyProxy(cluster.server, cluster.ca_file, pk / "admin-client.crt", pk / "admin-client.key",
                       workdir / "proxy.crt", workdir / "proxy.key", seed=seed).start()


def _setup_cluster(cluster: Any, nodes: int) -> client.ApiClient:
    api = cb.api_client(cluster)
    core = client.CoreV1Api(api)
    for ns in NAMESPACES:
        core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for name, value in PRIORITIES.items():
        cb.priority_class(api, name, value)
    names = [f"soak-{i}" for i in range(nodes)]
    cb.parallel(lambda n: core.create_node(fake_nodes.node_manifest(n, **NODE_SHAPE), _preload_content=False), names)
    fake_nodes.wait_nodes_ready(api, names, 180)
    return api


def _percentile(values: list[float], p: float) -> float | None:
    return round(cb.percentile(values, p), 1) if values else None


def _converge(api: client.ApiClient, bound: float) -> tuple[float | None, list[str]]:
    """Seconds until every PodGroup's status matches its members (None: not within ``bound``), and the
    last mismatches seen."""
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    t0 = time.monotonic()
    last: list[str] = []
    while time.monotonic() - t0 < bound:
        try:
            groups = custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
            pods = json.loads(core.list_pod_for_all_namespaces(_preload_content=False).data)["items"]
            last = inv.status_mismatches(groups, pods, POD_GROUP_LABEL)
            if not last:
                return round(time.monotonic() - t0, 1), []
        except client.ApiException as exc:
            last = [f"list failed: {exc.status}"]
        time.sleep(2)
    return None, last


class _Sampler:
    """Every 5 s: each controller replica's RSS (a :class:`~soak_invariants.Sample` per process) and the
    gangs waiting (PodGroups not released, from the record) for the plot."""

    def __init__(self, sup: Supervisor, rec: Recorder, clock, lock: threading.Lock) -> None:
        self.sup, self.rec, self.clock, self.lock = sup, rec, clock, lock
        self.waiting: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="soak-sampler", daemon=True)

    def start(self) -> "_Sampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _loop(self) -> None:
        while not self._stop.wait(5.0):
            t = self.clock()
            samples = []
            for name in CONTROLLERS:
                proc = self.sup.procs.get(name)
                if proc is not None and proc.alive():
                    samples.append(inv.Sample(t, f"{name}#{proc.pid}", rss_bytes(proc.pid)))
            with self.lock:
                self.rec.log.extend(samples)
            latest: dict[tuple[str, str], inv.GroupState] = {}
            for r in self.rec.snapshot():
                if isinstance(r, inv.GroupState):
                    latest[(r.ns, r.name)] = r
            self.waiting.append((t, sum(1 for g in latest.values() if not g.gone and not g.released_at
                                        and g.ns != "soak-canary")))


def _gangs_started(log: list[inv.Record]) -> int:
    groups = {(g.ns, g.name): g.min_member for g in log if isinstance(g, inv.GroupState)}
    return sum(1 for key, tl in inv.timelines(log).items()
               if key in groups and key[0] != "soak-canary" and any(b >= groups[key] for _, b, _ in tl.points))


def run_soak(seed: int, minutes: float, out_dir: Path, *, nodes: int = 8, gap: float = 20.0,
             check_every: float = 10.0, workdir: Path | None = None) -> dict[str, Any]:
    """One soak run (module doc); returns its summary (seed, faults, gangs, recoveries, violations), writes
    the plot ``soak-<seed>.png`` into ``out_dir`` and the whole event log, one JSON record a line, to
    ``$SOAK_EVENTS_DIR`` (default: the temporary directory) as ``cogate-soak-<seed>-events.jsonl``."""
    from cogate.localcluster.build import ensure_binaries
    from cogate.localcluster.cluster import LocalCluster

    ensure_binaries(["etcd", "kubernetes", "kwok", "cluster-autoscaler"], log=sys.stderr)
    workdir = workdir or Path(tempfile.mkdtemp(prefix=f"cogate-soak-{seed}-"))
    workdir.mkdir(parents=True, exist_ok=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    t_start = time.monotonic()

    def clock() -> float:
        return time.monotonic() - t_start
    with LocalCluster(timeout=120, autoscaler=autoscaler_spec()) as cluster, contextlib.ExitStack() as stack:
        api = _setup_cluster(cluster, nodes)
        CogateStack(cluster, workdir).apply_crd()
        proxy = _start_proxy(cluster, workdir, seed)
        stack.callback(proxy.stop)
        sup = Supervisor(cluster, workdir, DEFAULT_GATE_NAME,
                         _proxy_kubeconfig(workdir, proxy.port, workdir / "proxy-ca.crt"),
                         provisioning_class=PROVISIONING_CLASS)
        stack.callback(sup.stop)
        sup.start()
        rec = Recorder(cb.api_client(cluster), DEFAULT_GATE_NAME, clock).start()
        stack.callback(rec.stop)
        sampler = _Sampler(sup, rec, clock, rec.lock).start()
        stack.callback(sampler.stop)
        chaos = Chaos(cluster, sup, proxy, cb.api_client(cluster), NODE_SHAPE, clock)
        work = Workloads(cb.api_client(cluster), list(NAMESPACES[:3]), seed, clock).start()
        stack.callback(work.stop)
        injectors = [Injector(name, kinds, seed, gap, clock, chaos.apply, chaos.canary, rec.log, rec.lock)
                     for name, kinds in (("processes", PROCESS_FAULTS), ("network-nodes", OTHER_FAULTS))]
        for i in injectors:
            stack.callback(i.stop)
        stack.callback(chaos.stopping.set)  # first on the way out: a waiting canary gives up
        time.sleep(10)  # the first leader and the first gangs before the first fault
        for i in injectors:
            i.start()
        live = _watch_invariants(rec, seed, minutes, check_every, clock)
        faults_end = clock()
        chaos.stopping.set()
        for i in injectors:
            i.stop()
        work.stop()
        cb.log(f"soak {seed}: faults stopped at t={faults_end:.0f}; waiting for the PodGroups' status to converge")
        converged, mismatches = _converge(api, inv.BOUNDS["converge"])
        work.stop(delete_all=True)
        time.sleep(5)
        sampler.stop()
        rec.stop()
        log = rec.snapshot()
        transitions = _lease_transitions(api)
    violations = inv.check(log)
    if converged is None:
        violations.append(inv.Violation("not_converged", faults_end, "-", "; ".join(mismatches[:5])))
    return _summary(seed, minutes, log, violations, injectors, work, sup, sampler, converged, transitions,
                    dict(proxy.counts), rec.relists, out_dir, live)


def _watch_invariants(rec: Recorder, seed: int, minutes: float, every: float, clock) -> dict[tuple[str, str], float]:
    """Check the invariants over the log so far every ``every`` s for ``minutes``; returns when each
    violation (invariant, object) was first seen."""
    live: dict[tuple[str, str], float] = {}
    end = clock() + minutes * 60
    while clock() < end:
        time.sleep(min(every, max(0.0, end - clock())))
        for v in inv.check(rec.snapshot()):
            key = (v.invariant, v.ref)
            if key not in live:
                live[key] = clock()
                cb.log(f"soak {seed}: VIOLATION {v.invariant} {v.ref} at t={v.t:.1f}: {v.message}")
    return live


def _lease_transitions(api: client.ApiClient) -> int:
    """Leader changes of cogate's Lease (-1: no Lease, no replica ever led)."""
    try:
        lease = client.CoordinationV1Api(api).read_namespaced_lease("cogate-controller", "default")
        return lease.spec.lease_transitions or 0
    except client.ApiException:
        return -1


def _summary(seed, minutes, log, violations, injectors, work, sup, sampler, converged, transitions, proxy_counts,
             relists, out_dir: Path, live) -> dict[str, Any]:
    faults = [r for r in log if isinstance(r, inv.Fault) and r.seconds >= 0]  # ended ones (not the "begun" records)
    recoveries = [s for i in injectors for _, s in i.recoveries if s is not None]
    unrecovered = sum(1 for i in injectors for _, s in i.recoveries if s is None)
    rss = [r.rss for r in log if isinstance(r, inv.Sample)]
    plot = _plot(seed, sampler.waiting, faults, out_dir)
    events = Path(os.environ.get("SOAK_EVENTS_DIR") or tempfile.gettempdir()) / f"cogate-soak-{seed}-events.jsonl"
    with open(events, "w") as f:
        for r in log:
            f.write(json.dumps({"type": type(r).__name__, **asdict(r)}) + "\n")
    return {
        "seed": seed, "minutes": minutes, "faults": dict(sorted(Counter(f.kind for f in faults).items())),
        "fault_errors": [e for i in injectors for e in i.errors][:20],
        "workloads": dict(work.created), "member_deletions": work.member_deletions, "workload_errors": len(work.errors),
        "gangs_started": _gangs_started(log), "restarts": dict(sup.restarts), "lease_transitions": transitions,
        "recovery_p50": _percentile(recoveries, 50), "recovery_p99": _percentile(recoveries, 99),
        "recoveries": len(recoveries), "unrecovered": unrecovered, "converged_seconds": converged,
        "rss_max_mib": round(max(rss) / 2**20, 1) if rss else None, "proxy": proxy_counts,
        "recorder_list_retries": relists, "records": len(log), "plot": plot, "events_file": str(events),
        "violations": [{**asdict(v), "seen_live_at": next((round(t, 1) for k, t in live.items()
                                                           if k[0] == v.invariant and k[1] == v.ref), None),
                        "around": [_fmt(r) for r in inv.around(log, v)]} for v in violations],
    }


def _fmt(r: inv.Record) -> str:
    d = asdict(r)
    t = d.pop("t")
    return f"t={t:.1f} {type(r).__name__} " + " ".join(f"{k}={v}" for k, v in d.items() if v not in ("", False, 0))


def _plot(seed: int, waiting: list[tuple[float, int]], faults: list[inv.Fault], out_dir: Path) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(10, 4))
    if waiting:
        ax.plot([t / 60 for t, _ in waiting], [n for _, n in waiting], color="tab:blue", label="gangs waiting")
    kinds = sorted({f.kind for f in faults})
    top = max([n for _, n in waiting] + [1])
    cmap = plt.get_cmap("tab20")
    for i, kind in enumerate(kinds):
        mine = [f for f in faults if f.kind == kind]
        y = top * (1.05 + 0.05 * i)
        ax.hlines([y] * len(mine), [f.t / 60 for f in mine], [(f.t + max(f.seconds, 1.0)) / 60 for f in mine],
                  colors=[cmap(i % 20)], linewidth=5, label=kind)
    ax.set_xlabel("minutes")
    ax.set_ylabel("PodGroups not released")
    ax.set_title(f"Chaos soak, seed {seed}: gangs waiting and faults over time")
    ax.legend(fontsize=6, ncol=3, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    name = f"soak-{seed}.png"
    fig.savefig(out_dir / name, dpi=90)
    plt.close(fig)
    return name


# ---------------------------------------------------------------------- as a benchmark module

SETTINGS = {"nodes": "8 kwok nodes of 8 CPU, and 0-4 of 8 CPU from cluster-autoscaler 1.36.1 for the scale-up gangs",
            "controller": "2 replicas, leader election on, through the faulty proxy, ProvisioningRequests on",
            "fault gap": "exponential, mean 20 s, two injectors"}


def _seeds() -> list[int]:
    return [int(s) for s in os.environ.get("SOAK_SEED", "1").replace(",", " ").split()]


def run(quick: bool, out_dir: Path) -> dict[str, Any]:
    """The benchmark contract (bench/README.md): every seed of ``$SOAK_SEED`` for ``$SOAK_MINUTES``."""
    minutes = 2.0 if quick else float(os.environ.get("SOAK_MINUTES", "10"))
    runs = []
    for seed in _seeds():
        cb.log(f"soak: seed {seed}, {minutes:g} min")
        runs.append(run_soak(seed, minutes, out_dir))
    return result(runs)


def result(runs: list[dict[str, Any]]) -> dict[str, Any]:
    rows = [[r["seed"], r["minutes"], sum(r["faults"].values()), r["gangs_started"], sum(r["workloads"].values()),
             r["lease_transitions"], r["recovery_p50"], r["recovery_p99"], r["unrecovered"], r["converged_seconds"],
             r["rss_max_mib"], len(r["violations"])] for r in runs]
    kinds = sorted({k for r in runs for k in r["faults"]})
    fault_rows = [[k, *(r["faults"].get(k, 0) for r in runs)] for k in kinds]
    vrows = [[r["seed"], v["invariant"], round(v["t"], 1), v["ref"], v["message"]] for r in runs for v in r["violations"]]
    notes = [f"Seed {r['seed']}: workloads {r['workloads']}, members deleted {r['member_deletions']}, process restarts "
             f"{r['restarts']}, proxy {r['proxy']}, recorder list retries {r['recorder_list_retries']}, records {r['records']}; "
             f"fault errors: {r['fault_errors'] or 'none'}" for r in runs]
    for r in runs:
        for v in r["violations"]:
            notes.append(f"Seed {r['seed']}, {v['invariant']} {v['ref']} at t={v['t']:.1f}: {v['message']}. "
                         "Event log around it: " + " | ".join(v["around"][-15:]))
    total = sum(len(r["violations"]) for r in runs)
    return cb.result(
        "soak", "Chaos soak (issue 35)",
        "Local control plane, 8 kwok nodes of 8 CPU, cogate's webhook and two controller replicas with leader "
        "election (through a proxy that cuts, stalls, slows and fails their API calls); a seeded stream of "
        "ReplicaSets, Jobs, Indexed Jobs, StatefulSets, high-priority gangs that preempt, gangs that never fit, "
        "gangs with role minimums, gangs that need nodes from the real cluster-autoscaler (ProvisioningRequests), "
        "low-priority fillers and deleted members; seeded faults (SIGKILL/SIGSTOP of the replicas and the webhook, "
        "restarts of kube-apiserver, kube-scheduler, kube-controller-manager, proxy faults, node deletions and "
        "cordons, webhook certificate rotation); the invariants of bench/soak_invariants.py checked every 10 s over "
        "the recorded log and at the end (docs/operations/soak.md).",
        "none: invariants, not a ratio",
        tables=[cb.table("Runs (recovery: fault start to a canary gang bound, seconds; convergence: faults stopped "
                         "to every PodGroup status true, seconds)",
                         ["seed", "minutes", "faults", "gangs started", "workloads", "leader changes",
                          "recovery p50", "recovery p99", "not recovered", "converged after", "controller RSS max MiB",
                          "violations"], rows),
                cb.table("Faults by kind", ["kind", *(f"seed {r['seed']}" for r in runs)], fault_rows),
                cb.table("Violations", ["seed", "invariant", "t (s)", "object", "what"], vrows)],
        plots=[{"file": r["plot"], "caption": f"Seed {r['seed']}: gangs waiting and faults over time"}
               for r in runs if r["plot"]],
        targets=[cb.target("invariant violations", "0 in every run", str(total), total == 0,
                           "see the Violations table and the notes")],
        notes=notes)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=float(os.environ.get("SOAK_MINUTES", "3")))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out-dir", type=Path, default=None)
    ap.add_argument("--gap", type=float, default=20.0, help="mean seconds between faults of each injector")
    ap.add_argument("--recheck", type=Path, metavar="EVENTS_JSONL",
                    help="run no soak: judge a recorded run's event log with this checkout's invariants")
    args = ap.parse_args(argv)
    if args.recheck:
        log = inv.read_log(args.recheck.read_text().splitlines())
        violations = inv.check(log)
        for v in violations:
            print(f"VIOLATION {v.invariant} {v.ref} t={v.t:.1f}: {v.message}")
        print(f"{len(violations)} violations in {len(log)} records of {args.recheck}")
        return 1 if violations else 0
    out = args.out_dir or Path(tempfile.mkdtemp(prefix="cogate-soak-"))
    summary = run_soak(args.seed, args.minutes, out, gap=args.gap)
    print(json.dumps({k: v for k, v in summary.items() if k != "violations"}, indent=1))
    for v in summary["violations"]:
        print(f"VIOLATION {v['invariant']} {v['ref']} t={v['t']:.1f}: {v['message']}")
        for line in v["around"]:
            print("    " + line)
    print(f"{len(summary['violations'])} violations; plot in {out}, event log {summary['events_file']}")
    return 1 if summary["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
