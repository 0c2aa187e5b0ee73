"""Benchmark 7 (issue 10): side by side with scheduler-plugins' Coscheduling.

Coscheduling is built from a source snapshot (argument ``--src``, default
``$COGATE_COSCHEDULING_SRC``, else the repository's ``third_party/scheduler-plugins-v0.34.7``;
see ``third_party/README.md`` for its origin) by :mod:`schedplugins` into
cogate's cache, and run as a second scheduler (profile ``scheduler-plugins-scheduler``
enabling Coscheduling at queueSort, preFilter, postFilter, permit and reserve, as in its
``manifests/coscheduling/scheduler-config.yaml``; client rate limits at kube-scheduler's
defaults) plus its PodGroup controller, with the admin kubeconfig (its RBAC is not needed).

Two control planes, one after the other, same node shapes and same workloads: one with
cogate (our CRD, webhook, controller; kube-scheduler binds), one with Coscheduling (its
CRD from ``manifests/crds``, its scheduler and controller; pods set ``schedulerName``).
Why not one plane: both systems select pods by the same label
(``scheduling.x-k8s.io/pod-group``), so cogate's webhook would gate Coscheduling's pods,
and only one ``podgroups.scheduling.x-k8s.io`` CRD can exist. The PodGroup manifests are
the same dicts for both, so every run also checks that both CRDs accept them.

Workloads (pods 100m/64Mi unless said; ReplicaSets created at once, PodGroups first):

- README example: 1 node (10 CPU, 8Gi); 6 pods of 3 CPU / 500Mi; minMember 3 (3 can run)
  and minMember 4 (none can run; watched for 15 s);
- two groups competing: 2 nodes of 4 CPU; groups A and B of 6 pods of 1 CPU, minMember 6:
  room for one of them; watched 20 s after the winner is bound;
- 100 groups of 8 and one group of 1,000 on 100 nodes (4 CPU, 16Gi).

Time = first create call -> the watch sees the expected number of pods bound (3, 0, 6,
800, 1,000). Ratio cogate / Coscheduling.

A group is **partly bound** when, at some moment, 0 < bound members < minMember and then
either (a) it is still below minMember when the workload ends ("stranded": its pods hold
room while it cannot run), or (b) it reaches minMember only more than ``5 s + minMember /
50 s`` after its first member was bound (50/s: kube-scheduler's default client rate limit,
i.e. the fastest binding rate; a gang that binds at that rate is not "partly bound").

    python bench/bench_coscheduling.py [--quick] [--src DIR]       # prints RESULT <json>
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import clusterbench as cb  # noqa: E402
import schedplugins  # noqa: E402

from cogate.localcluster.cluster import free_ports  # noqa: E402

NAME = "coscheduling"
TITLE = "Side by side with scheduler-plugins Coscheduling"
NEEDS_CLUSTER = True


def unavailable() -> str | None:
    """Why the benchmark cannot run here (no scheduler-plugins source), or None."""
    if not (schedplugins.DEFAULT_SRC / "go.mod").is_file():
        return (f"no scheduler-plugins source at {schedplugins.DEFAULT_SRC} "
                "(set COGATE_COSCHEDULING_SRC to a kubernetes-sigs/scheduler-plugins v0.34.7 checkout)")
    return None
SCHEDULER_NAME = "scheduler-plugins-scheduler"
BIND_RATE = 50.0  # kube-scheduler's default client QPS
README_NODE = {"cpu": "10", "memory": "8Gi", "pods": 110}
COMPETE_NODE = {"cpu": "4", "memory": "16Gi", "pods": 110}
BIG_NODE = {"cpu": "4", "memory": "16Gi", "pods": 110}


@dataclass
class Workload:
    label: str
    node_count: int
    node_shape: dict[str, Any]
    groups: list[tuple[str, int, int]]  # (name, replicas, minMember)
    cpu: str = "100m"
    memory: str = "64Mi"
    expect_bound: int = 0
    hold_s: float = 2.0  # keep watching after the expected count is bound (or from the start when 0)


def workloads(quick: bool) -> list[Workload]:
    out = [
        Workload("README example, minMember 3", 1, README_NODE, [("nginx", 6, 3)], "3", "500Mi", 3, 5.0),
        Workload("README example, minMember 4", 1, README_NODE, [("nginx", 6, 4)], "3", "500Mi", 0, 15.0),
        Workload("two groups competing for room for one", 2, COMPETE_NODE, [("a", 6, 6), ("b", 6, 6)], "1", "1Gi",
                 6, 20.0),
    ]
    if quick:
        out[1].hold_s, out[2].hold_s = 5.0, 5.0
        out += [Workload("2 groups of 4", 10, BIG_NODE, [(f"g{i}", 4, 4) for i in range(2)], expect_bound=8),
                Workload("1 group of 8", 10, BIG_NODE, [("big", 8, 8)], expect_bound=8)]
    else:
        out += [Workload("100 groups of 8", 100, BIG_NODE, [(f"g{i}", 8, 8) for i in range(100)], expect_bound=800),
                Workload("1 group of 1,000", 100, BIG_NODE, [("big", 1000, 1000)], expect_bound=1000)]
    return out


# ------------------------------------------------------------------ analysis

def quorum(times: list[float], min_member: int) -> tuple[str | None, float | None]:
    """The module doc's rule for one group from its members' bind times (sorted, seconds, up to the
    end of the workload): ``("stranded", None)`` when 0 < bound < minMember, ``("slow", lag)`` when
    minMember was reached more than ``5 s + minMember / BIND_RATE`` after the first binding, else
    ``(None, lag)`` (``lag`` None when nothing was bound). Shared with bench_preemption_cluster."""
    if not times:
        return None, None
    if len(times) < min_member:
        return "stranded", None
    lag = times[min_member - 1] - times[0]
    return ("slow" if lag > 5.0 + min_member / BIND_RATE else None), lag


def partial_binding(watch: cb.PodWatch, ns: str, w: Workload, end: float) -> dict[str, Any]:
    """Per the module doc: groups partly bound (stranded or slow to quorum), and the worst quorum lag."""
    with watch.lock:
        log = [(t, g) for t, n, _, g in watch.bind_log if n == ns]
    stranded, slow, lags = [], [], []
    for name, _, min_member in w.groups:
        kind, lag = quorum(sorted(t for t, g in log if g == name and t <= end), min_member)
        if kind == "stranded":
            stranded.append(f"{name} ({sum(1 for t, g in log if g == name and t <= end)}/{min_member})")
            continue
        if lag is not None:
            lags.append(lag)
        if kind == "slow":
            slow.append(f"{name} ({lag:.1f} s)")
    return {"stranded": stranded, "slow": slow, "max quorum lag s": round(max(lags), 2) if lags else None,
            "bound": sum(1 for t, _ in log if t <= end)}


def run_workload(cluster: Any, api, watch: cb.PodWatch, w: Workload, scheduler_name: str | None,
                 timeout: float) -> dict[str, Any]:
    cb.set_nodes(cluster, w.node_count, **w.node_shape)
    ns = cb.new_namespace(api, "cos" if scheduler_name else "cog")
    try:
        cb.parallel(lambda g: cb.create_pod_group(api, ns, cb.pod_group(g[0], g[2])), w.groups)
        t0 = time.monotonic()
        cb.parallel(lambda g: cb.create_replica_set(api, ns, cb.replica_set(
            g[0], g[1], group=g[0], cpu=w.cpu, memory=w.memory, scheduler_name=scheduler_name)), w.groups)
        reached = None
        if w.expect_bound:
            try:
                reached = watch.wait_bound(ns, w.expect_bound, timeout) - t0
            except TimeoutError:
                reached = None
        hold_until = time.monotonic() + w.hold_s
        time.sleep(max(0.0, hold_until - time.monotonic()))
        end = time.monotonic()
        out = partial_binding(watch, ns, w, end)
        out["time s"] = round(reached, 2) if reached is not None else None
        out["timed out"] = bool(w.expect_bound) and reached is None
        out["over-bound"] = out["bound"] > w.expect_bound  # e.g. the losing group got members bound
        return out
    finally:
        cb.delete_namespace(api, ns)


def partly(x: dict[str, Any]) -> str:
    """The groups :func:`partial_binding` found partly bound, in words ("no" when none)."""
    items = x["stranded"] + x["slow"]
    return ", ".join(items) if items else "no"


# ------------------------------------------------------------------ Coscheduling processes

def scheduler_config(kubeconfig: Path, permit_wait_s: int = 10) -> dict[str, Any]:
    """KubeSchedulerConfiguration of the second scheduler (manifests/coscheduling/scheduler-config.yaml's plugins,
    under its own profile name)."""
    def cos() -> dict[str, Any]:
        return {"enabled": [{"name": "Coscheduling"}]}
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "profiles": [{
            "schedulerName": SCHEDULER_NAME,
            "plugins": {"queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
                        "preFilter": cos(), "postFilter": cos(), "permit": cos(), "reserve": cos()},
            "pluginConfig": [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": permit_wait_s}}],
        }],
    }


def crd_file(src: Path, name: str) -> Path:
    """``manifests/crds/<name>`` of the snapshot; in the git tree these are symbolic links, stored in a
    snapshot as a small text file holding the link target (``../coscheduling/crd.yaml``): followed."""
    path = src / "manifests" / "crds" / name
    text = path.read_text().strip()
    if "\n" not in text and text.endswith(".yaml") and not text.startswith("apiVersion"):
        path = (path.parent / text).resolve()
    return path


class Coscheduling:
    """scheduler-plugins' scheduler and PodGroup controller as child processes of this one."""

    def __init__(self, cluster: Any, src: Path) -> None:
        self.cluster = cluster
        self.src = src
        self.dir = Path(tempfile.mkdtemp(prefix="cogate-bench-cosched-"))
        self.procs: dict[str, subprocess.Popen] = {}

    def __enter__(self) -> "Coscheduling":
        bins = schedplugins.ensure_built(self.src)
        for crd in ("scheduling.x-k8s.io_podgroups.yaml", "scheduling.x-k8s.io_elasticquotas.yaml"):
            self.cluster.kubectl("apply", "--server-side", "-f", str(crd_file(self.src, crd)))
        self.cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                             "crd/podgroups.scheduling.x-k8s.io", "crd/elasticquotas.scheduling.x-k8s.io")
        kc = self.cluster.kubeconfig
        cfg = self.dir / "scheduler-config.yaml"
        cfg.write_text(yaml.safe_dump(scheduler_config(kc)))
        sched_port, metrics_port, probe_port = free_ports(3)
        self._spawn("scheduler", [str(bins["kube-scheduler"]), f"--config={cfg}", "--bind-address=127.0.0.1",
                                  f"--secure-port={sched_port}", f"--authentication-kubeconfig={kc}",
                                  f"--authorization-kubeconfig={kc}", "--v=1"])
        self._spawn("controller", [str(bins["controller"]), f"--metricsAddr=127.0.0.1:{metrics_port}",
                                   f"--probeAddr=127.0.0.1:{probe_port}"])
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        self._wait_ok("scheduler", f"https://127.0.0.1:{sched_port}/healthz", ctx)
        self._wait_ok("controller", f"http://127.0.0.1:{probe_port}/healthz", None)
        return self

    def _spawn(self, name: str, cmd: list[str]) -> None:
        with open(self.dir / f"{name}.log", "ab") as out:
            self.procs[name] = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                env=dict(os.environ, KUBECONFIG=str(self.cluster.kubeconfig)),
                                                start_new_session=True)

    def _wait_ok(self, name: str, url: str, ctx: Any, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.procs[name].poll() is not None:
                raise RuntimeError(f"Coscheduling {name} exited: {self.tail(name)}")
            try:
                with urllib.request.urlopen(url, timeout=2, context=ctx) as resp:
                    if resp.status == 200:
                        return
            except Exception:  # noqa: BLE001 - polling
                pass
            time.sleep(0.3)
        raise RuntimeError(f"Coscheduling {name} not healthy at {url}: {self.tail(name)}")

    def tail(self, name: str, lines: int = 20) -> str:
        try:
            return "\n".join((self.dir / f"{name}.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __exit__(self, *exc: object) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)


# ------------------------------------------------------------------ the benchmark

def _system(system: str, quick: bool, src: Path, timeout: float) -> dict[str, dict[str, Any]]:
    with cb.control_plane() as c:
        if system == "cogate":
            ctx: Any = cb.cogate_stack(c)
            sched = None
        else:
            ctx = Coscheduling(c, src)
            sched = SCHEDULER_NAME
        with ctx:
            api = cb.api_client(c)
            out = cb.run_workloads(api, NAME, system, workloads(quick),
                                   lambda watch, w: run_workload(c, api, watch, w, sched, timeout))
            api.close()
    return out


def run(quick: bool, out_dir: Path, src: str | Path | None = None) -> dict[str, Any]:
    src = Path(src) if src else schedplugins.DEFAULT_SRC
    timeout = 60 if quick else 600
    t = time.monotonic()
    schedplugins.ensure_built(src)  # before any control plane: a build takes minutes
    build_s = time.monotonic() - t
    res = {s: _system(s, quick, src, timeout) for s in ("cogate", "coscheduling")}
    rows, targets = [], []
    for w in workloads(quick):
        a, b = res["cogate"][w.label], res["coscheduling"][w.label]
        r = cb.ratio(a["time s"], b["time s"]) if a["time s"] and b["time s"] else None
        rows.append([w.label, w.expect_bound, a["time s"], b["time s"], r, a["bound"], b["bound"],
                     partly(a), partly(b), a["max quorum lag s"], b["max quorum lag s"]])
    # the report names no machine's directories: the source relative to the repository, binaries to the cache
    shown_src = os.path.relpath(src.resolve(), Path(__file__).resolve().parents[1])
    shown_bin = schedplugins.bin_dir(src).relative_to(schedplugins.cache_dir())
    notes = [f"Coscheduling built from {shown_src} (relative to the repository; version "
             f"{schedplugins.version_of(src)}; binaries in cogate's cache, {shown_bin}; {build_s:.0f} s spent "
             "building in this run, 0 when cached). It links "
             "Kubernetes 0.34 libraries and runs against the 1.36 control plane: two minor versions older than the "
             "API server, outside the supported skew for kube-scheduler (one), but it schedules normally here.",
             "Each system runs in its own control plane, one after the other: the same label "
             "(scheduling.x-k8s.io/pod-group) selects both systems' pods and only one podgroups CRD can exist. The "
             "same PodGroup manifests were accepted by both CRDs (ours and manifests/crds of scheduler-plugins).",
             "Coscheduling permitWaitingTimeSeconds 10 (its sample configuration); cogate with its defaults "
             "(placement pinned, debounce 0.05 s, 8 workers).",
             "raw figures: " + json.dumps(res)]
    return cb.result(
        NAME, TITLE,
        "The same workloads (README example, two groups competing for room for one, 100 groups of 8, one group of "
        "1,000) through cogate and through scheduler-plugins' Coscheduling (second scheduler + PodGroup controller), "
        "each in its own local control plane with the same kwok nodes. Time from the first create call until a pod "
        "watch sees the expected pods bound; whether any group was partly bound (at some moment 0 < bound < "
        "minMember and then still below minMember at the end, or reaching it only more than 5 s + minMember/50 s "
        "after its first binding).",
        "Coscheduling, same workloads, same machine, same run (ratio cogate / Coscheduling).",
        tables=[cb.table("Time until the expected pods are bound, and partial binding",
                         ["workload", "expected bound", "cogate s", "Coscheduling s", "ratio", "cogate bound",
                          "Coscheduling bound", "cogate partly bound", "Coscheduling partly bound",
                          "cogate max quorum lag s", "Coscheduling max quorum lag s"], rows)],
        targets=targets, notes=notes)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", type=Path, default=schedplugins.DEFAULT_SRC,
                    help="scheduler-plugins source snapshot (default %(default)s)")
    ns, rest = ap.parse_known_args()
    cb.main(lambda quick, out: run(quick, out, ns.src), rest)
