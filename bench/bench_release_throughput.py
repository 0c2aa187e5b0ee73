"""Benchmark 4 (issue 10): release throughput, gate removals per second against raw JSON patches.

100 kwok nodes (32 CPU, 128Gi, 110 pods); 200 PodGroups of 8 members of 100m / 64Mi, all of
which fit. The controller is stopped while the 200 PodGroups and their 1,600 pods are created
(the webhook gates the pods), then started: it plans and releases everything it finds, so
the rate is the controller's release capacity, not the creation rate. Rate = (removals - 1)
/ (last - first gate removal seen by the pod watch).

Baseline, same run: 1,600 unlabelled pods created with the same gate by hand (cogate never
sees them) and released by a minimal client in a separate process, with as many threads
as the controller has workers (its default ``--workers``, 32 since issue 19): one JSON Patch per pod, the very patch the controller
sends (``reconciler.release_patch``: pin to a node with a required node affinity, ``test``
the gate, ``remove`` it), nodes round-robin, no read before the patch, no status write, no
planning. Both runs are timed by the same pod watch; kube-scheduler binds the pods of both.

    python bench/bench_release_throughput.py [--quick]       # prints RESULT <json>
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import clusterbench as cb  # noqa: E402

from cogate.api import DEFAULT_GATE_NAME  # noqa: E402
from cogate.controller.model.config import DEFAULT_WORKERS  # noqa: E402

NAME = "release_throughput"
TITLE = "Release throughput"
NEEDS_CLUSTER = True
NODE_SHAPE = {"cpu": "32", "memory": "128Gi", "pods": 110}
TARGET = 0.7
#: The raw client's threads: as many as the controller's default workers (it runs with its defaults).
WORKERS = DEFAULT_WORKERS


def raw_patcher(args_file: str) -> None:
    """Child process: send the release patches of ``args_file`` ({kubeconfig, namespace, gate, workers,
    pods: [[name, node]]}) from ``workers`` threads; print the seconds it took."""
    from kubernetes import client, config

    from cogate.controller.planning.patches import release_patch

    a = json.loads(Path(args_file).read_text())
    cfg = client.Configuration()
    config.load_kube_config(config_file=a["kubeconfig"], client_configuration=cfg)
    cfg.connection_pool_maxsize = a["workers"] * 2
    api = client.ApiClient(cfg)
    core = client.CoreV1Api(api)
    manifest = cb.pod("x", gate=a["gate"])  # the shape of every pod: one gate, no affinity
    patches = [(name, release_patch(manifest, a["gate"], node)) for name, node in a["pods"]]

    def send(item):
        name, ops = item
        core.patch_namespaced_pod(name, a["namespace"], ops, _content_type="application/json-patch+json",
                                  _preload_content=False, _request_timeout=30)
    t0 = time.monotonic()
    cb.parallel(send, patches, workers=a["workers"])
    print(json.dumps({"seconds": time.monotonic() - t0}))


def _rate(watch: cb.PodWatch, ns: str) -> tuple[float, float, int]:
    ts = sorted(p.ungated for p in watch.pods(ns) if p.ungated is not None and p.gated_at_creation)
    span = ts[-1] - ts[0] if len(ts) > 1 else 0.0
    return ((len(ts) - 1) / span if span > 0 else float("nan")), span, len(ts)


def run(quick: bool, out_dir: Path, cluster: Any = None) -> dict[str, Any]:
    nodes, groups, size = (10, 2, 4) if quick else (100, 200, 8)
    total = groups * size
    timeout = 60 if quick else 600
    notes: list[str] = []
    with cb.control_plane(cluster) as c:
        cb.log(f"{NAME}: {nodes} nodes, {groups} groups of {size}")
        node_names = cb.set_nodes(c, nodes, **NODE_SHAPE)
        with cb.cogate_stack(c) as stack:
            api = cb.api_client(c)
            with cb.PodWatch(api) as watch:
                # -- baseline: raw patches from a minimal client
                raw_ns = cb.new_namespace(api, "thr-raw")
                names = [f"p{i}" for i in range(total)]
                cb.parallel(lambda n: cb.create_pod(api, raw_ns, cb.pod(n, gate=DEFAULT_GATE_NAME)), names)
                watch.wait(lambda: len(watch.pods(raw_ns)) == total, timeout, "raw pods seen")
                with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
                    json.dump({"kubeconfig": str(c.kubeconfig), "namespace": raw_ns, "gate": DEFAULT_GATE_NAME,
                               "workers": WORKERS,
                               "pods": [[n, node_names[i % len(node_names)]] for i, n in enumerate(names)]}, fh)
                cb.log(f"{NAME}: raw patches")
                proc = subprocess.run([sys.executable, __file__, "--raw-patcher", fh.name], capture_output=True,
                                      text=True, timeout=timeout, env=dict(os.environ))
                os.unlink(fh.name)
                if proc.returncode != 0:
                    raise RuntimeError(f"raw patcher failed: {proc.stderr[-2000:]}")
                client_s = json.loads(proc.stdout.strip().splitlines()[-1])["seconds"]
                watch.wait_ungated(raw_ns, total, timeout)
                raw_rate, raw_span, raw_n = _rate(watch, raw_ns)
                watch.wait_bound(raw_ns, total, timeout)
                cb.log(f"{NAME}: raw: all bound")
                cb.delete_namespace(api, raw_ns)
                cb.log(f"{NAME}: raw: deleted")

                # -- cogate: controller stopped while everything is created, then started
                ns = cb.new_namespace(api, "thr-gang")
                stack.processes.pop("controller").stop()
                gnames = [f"g{i}" for i in range(groups)]
                cb.parallel(lambda g: cb.create_pod_group(api, ns, cb.pod_group(g, size)), gnames)
                members = [(g, f"{g}-{k}") for g in gnames for k in range(size)]
                cb.parallel(lambda m: cb.create_pod(api, ns, cb.pod(m[1], group=m[0])), members)
                watch.wait(lambda: len(watch.pods(ns)) == total, timeout, "members seen")
                assert all(p.gated_at_creation for p in watch.pods(ns)), "the webhook did not gate every member"
                cb.log(f"{NAME}: controller start")
                req_before = cb.apiserver_requests(api)
                t_start = time.monotonic()
                stack.start_controller()
                t_ready = time.monotonic()
                watch.wait_ungated(ns, total, timeout)
                gang_rate, gang_span, gang_n = _rate(watch, ns)
                first = min(p.ungated for p in watch.pods(ns))
                cb.log(f"{NAME}: all gates removed")
                watch.wait_bound(ns, total, timeout)
                cb.log(f"{NAME}: all bound")
                stats = cb.controller_stats(stack)  # a new process: its counters start at 0
                req = cb.stats_delta(req_before, cb.apiserver_requests(api))
                cb.delete_namespace(api, ns)
            api.close()
    r = cb.ratio(gang_rate, raw_rate)
    notes.append(f"raw client: {raw_n} patches in {client_s:.2f} s by its own clock ({raw_n / client_s:.0f}/s); "
                 f"watch span first->last removal {raw_span:.2f} s")
    notes.append(f"cogate: controller start -> ready {t_ready - t_start:.2f} s (informers synced), ready -> first gate "
                 f"removed {first - t_ready:.2f} s, first -> last removal {gang_span:.2f} s; controller counters "
                 f"since start: {stats}")
    per = {k: round(v / total, 2) for k, v in sorted(req.items())
           if v and k.split(" ")[0] in ("GET", "PATCH", "POST") and k.split(" ")[1].split("/")[0] in ("pods", "podgroups")}
    notes.append(f"API server requests per member from the controller's start until all were bound (all clients: "
                 f"kube-scheduler's bindings and kwok's status updates included): {per}; the raw client sends one "
                 "JSON Patch per pod")
    return cb.result(
        NAME, TITLE,
        f"{groups} PodGroups of {size} members (100m/64Mi) on {nodes} kwok nodes ({NODE_SHAPE['cpu']} CPU), all "
        "fitting. The controller is stopped while groups and members are created (the webhook gates them), then "
        "started; gate removals per second = (n - 1) / (last - first removal), from a pod watch.",
        f"The same number of pods created with the same gate by hand, released by a minimal client (separate "
        f"process, {WORKERS} threads like the controller's {WORKERS} workers) sending the same JSON Patch per pod "
        "(pin + test + remove), timed by the same watch.",
        tables=[cb.table("Gate removals per second", ["releaser", "pods", "first->last removal s", "removals/s",
                                                      "ratio to raw"],
                         [["raw JSON patches", raw_n, round(raw_span, 2), round(raw_rate, 1), 1.0],
                          ["cogate controller", gang_n, round(gang_span, 2), round(gang_rate, 1), r]])],
        targets=[cb.target(f"gate removals per second, {groups} groups of {size}, cogate / raw patches",
                           f">= {TARGET}x", f"{r}x ({gang_rate:.0f}/s vs {raw_rate:.0f}/s)",
                           r is not None and r >= TARGET, "see notes")],
        notes=notes)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--raw-patcher":
        raw_patcher(sys.argv[2])
    else:
        cb.main(run)
