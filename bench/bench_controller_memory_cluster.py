"""Benchmark 6b (issue 10): controller memory in a real run, 1,000 kwok nodes and 20,000 pods.

1,000 kwok nodes (32 CPU, 128Gi, 110 pods). First 19,000 unlabelled pods of 10m / 16Mi created
already bound (``spec.nodeName`` set, 19 per node, as a DaemonSet or a second scheduler
would; kube-scheduler is not needed for them, which keeps the run within minutes), then 125
PodGroups of 8 members (1,000 pods) that the webhook gates, the controller releases and
kube-scheduler binds: 20,000 pods, all bound, all in the controller's caches (bound-pod
informer; members also in the member informer). Pods are created from 16 threads; if
creation takes longer than the budget (10 minutes) the run stops creating and says how many
pods it reached.

RSS (``VmRSS`` of ``/proc/<pid>/status``) of the controller process is sampled every 0.5 s;
baseline, same run: the RSS of kube-scheduler, which caches the same nodes and pods
(Go, informers of pods and nodes), and the controller's own RSS before the pods existed.

    python bench/bench_controller_memory_cluster.py [--quick]       # prints RESULT <json>
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import clusterbench as cb  # noqa: E402

from cogate.localcluster.cluster import rss_bytes  # noqa: E402

NAME = "controller_memory_cluster"
TITLE = "Controller memory, real run"
NEEDS_CLUSTER = True
NODE_SHAPE = {"cpu": "32", "memory": "128Gi", "pods": 110}
CREATE_BUDGET_S = 600.0
MB = 1024 * 1024


class Sampler(threading.Thread):
    def __init__(self, pids: dict[str, int], interval: float = 0.5) -> None:
        super().__init__(name="rss", daemon=True)
        self.pids = pids
        self.interval = interval
        self.samples: list[tuple[float, dict[str, int]]] = []
        self.stop_flag = threading.Event()

    def run(self) -> None:
        while not self.stop_flag.is_set():
            self.samples.append((time.monotonic(), {k: rss_bytes(p) for k, p in self.pids.items()}))
            self.stop_flag.wait(self.interval)

    def peak(self, name: str) -> int:
        return max((s[name] for _, s in self.samples), default=0)

    def stop(self) -> None:
        self.stop_flag.set()
        self.join(5)


def _plot(out_dir: Path, sampler: Sampler, t0: float) -> list[dict[str, str]]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name in ("controller", "kube-scheduler", "kube-apiserver"):
        ax.plot([t - t0 for t, _ in sampler.samples], [s[name] / MB for _, s in sampler.samples], label=name)
    ax.set_xlabel("seconds")
    ax.set_ylabel("RSS MiB")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out_dir / f"{NAME}.png", dpi=110)
    plt.close(fig)
    return [{"file": f"{NAME}.png", "caption": "RSS while nodes and pods are created"}]


def run(quick: bool, out_dir: Path, cluster: Any = None) -> dict[str, Any]:
    nodes, plain, groups, size = (10, 190, 2, 5) if quick else (1000, 19_000, 125, 8)
    notes: list[str] = []
    with cb.control_plane(cluster) as c:
        with cb.cogate_stack(c) as stack:
            pids = {"controller": cb.controller_pid(stack), "kube-scheduler": c.pids["kube-scheduler"],
                    "kube-apiserver": c.pids["kube-apiserver"]}
            sampler = Sampler(pids)
            t0 = time.monotonic()
            sampler.start()
            time.sleep(2)
            empty = {k: rss_bytes(p) for k, p in pids.items()}
            cb.log(f"{NAME}: {nodes} nodes")
            node_names = cb.set_nodes(c, nodes, **NODE_SHAPE)
            time.sleep(3)
            with_nodes = {k: rss_bytes(p) for k, p in pids.items()}
            api = cb.api_client(c)
            with cb.PodWatch(api) as watch:
                ns = cb.new_namespace(api, "mem")
                cb.log(f"{NAME}: {plain} bound pods")
                t_create = time.monotonic()
                created = 0
                chunk = 500
                for start in range(0, plain, chunk):
                    if time.monotonic() - t_create > CREATE_BUDGET_S:
                        notes.append(f"creation budget of {CREATE_BUDGET_S:.0f} s spent: stopped at {created} "
                                     f"of {plain} pre-bound pods")
                        break
                    batch = range(start, min(plain, start + chunk))
                    cb.parallel(lambda i: cb.create_pod(api, ns, cb.pod(
                        f"p{i}", cpu="10m", memory="16Mi", node_name=node_names[i % len(node_names)])), batch)
                    created += len(batch)
                create_s = time.monotonic() - t_create
                # Members after the pre-bound pods: those bypass the scheduler and cogate's reservations, so
                # created later they could take the room a released member is pinned to.
                gnames = [f"g{i}" for i in range(groups)]
                cb.parallel(lambda g: cb.create_pod_group(api, ns, cb.pod_group(g, size)), gnames)
                members = [(g, f"{g}-{k}") for g in gnames for k in range(size)]
                cb.parallel(lambda m: cb.create_pod(api, ns, cb.pod(m[1], group=m[0], cpu="10m", memory="16Mi")),
                            members)
                total = created + len(members)
                try:
                    watch.wait_bound(ns, total, 300)
                except TimeoutError:
                    n = sum(1 for p in watch.pods(ns) if p.bound is not None)
                    notes.append(f"only {n} of {total} pods were bound after 300 s; memory measured anyway")
                cb.log(f"{NAME}: {total} pods; settling")
                # let kwok mark them Running and the controller digest the events
                t_settle = time.monotonic()
                time.sleep(10 if quick else 30)
                final = {k: rss_bytes(p) for k, p in pids.items()}
                stats = cb.controller_stats(stack)
                if cluster is not None:  # a cluster of our own is simply stopped
                    cb.delete_namespace(api, ns, timeout=900)
            api.close()
            sampler.stop()
    plots = _plot(out_dir, sampler, t0)
    rows = [[k, round(empty[k] / MB, 1), round(with_nodes[k] / MB, 1), round(final[k] / MB, 1),
             round(sampler.peak(k) / MB, 1)] for k in pids]
    r_sched = cb.ratio(final["controller"], final["kube-scheduler"])
    r_idle = cb.ratio(final["controller"], empty["controller"])
    per_pod = (final["controller"] - with_nodes["controller"]) / max(1, total)
    notes += [f"{created} pre-bound pods created in {create_s:.0f} s ({created / max(create_s, 1e-9):.0f}/s), "
              f"{len(members)} members in {groups} PodGroups released by cogate; settled {time.monotonic() - t_settle:.0f} s",
              f"controller: {per_pod / 1024:.1f} KiB per pod above its RSS with nodes only; counters: {stats}"]
    return cb.result(
        NAME, TITLE,
        f"RSS of the controller process on the local control plane with {nodes} kwok nodes and {total} pods "
        f"({created} unlabelled pods created bound, {len(members)} members of {groups} PodGroups released by cogate), "
        "sampled every 0.5 s; the final figure after 30 s of settling.",
        "kube-scheduler's RSS in the same run (it caches the same nodes and pods), and the controller's RSS before "
        "the nodes and pods existed.",
        tables=[cb.table("Resident memory (MiB)", ["process", "empty cluster", f"{nodes} nodes",
                                                   f"{nodes} nodes + {total} pods", "peak"], rows),
                cb.table("Ratios", ["what", "ratio"],
                         [["controller / kube-scheduler, final", r_sched],
                          ["controller final / controller on an empty cluster", r_idle]])],
        plots=plots,
        targets=[cb.target(f"controller RSS with {nodes} nodes and {total} pods (real run; the 400 MB target of "
                           "issue 10 is for 100,000 pods, benchmark 6a)", "<= 400 MB",
                           f"{final['controller'] / MB:.0f} MiB ({r_sched}x kube-scheduler)",
                           final["controller"] <= 400 * 1000 * 1000, "see notes")],
        notes=notes)


if __name__ == "__main__":
    cb.main(run)
