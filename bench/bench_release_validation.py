"""Release latency with and without the dry-run validation of release patches (issue 9 item 2).

Starts a local control plane and cogate, then alternates the controller between
``--validate-releases`` (default) and ``--no-validate-releases``. Each run: a ReplicaSet of
``--members`` pods (the README example's pods) is created before its PodGroup (minMember =
members, one node with room for all), so every member waits gated; then the PodGroup is
created and the time until every gate is gone is measured on one watch clock. Prints the
median per mode and the ratio validated / not validated (same run, same machine).

    .venv/bin/python bench/bench_release_validation.py --runs 5 --members 6
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kubernetes import client

from cogate.api import GROUP, PLURAL, VERSION
from cogate.localcluster import example
from cogate.localcluster.build import ensure_binaries
from cogate.localcluster.cluster import LocalCluster
from cogate.localcluster.nodes import node_manifest
from cogate.localcluster.stack import CogateStack


def one_release(api: client.ApiClient, namespace: str, members: int) -> float:
    core = client.CoreV1Api(api)
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    client.AppsV1Api(api).create_namespaced_replica_set(
        namespace, example.replica_set("r", members, namespace=namespace, group="r", cpu="100m"))
    deadline = time.monotonic() + 60
    while len(core.list_namespaced_pod(namespace).items) < members:
        if time.monotonic() > deadline:
            raise RuntimeError("pods not created")
        time.sleep(0.05)
    time.sleep(0.5)  # every member admitted and seen by the controller
    t0 = time.monotonic()
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, example.pod_group("r", members, namespace=namespace, timeout_seconds=None))
    while any(p.spec.scheduling_gates for p in core.list_namespaced_pod(namespace).items):
        if time.monotonic() - t0 > 30:
            raise RuntimeError("not released")
        time.sleep(0.01)
    took = time.monotonic() - t0
    core.delete_namespace(namespace, propagation_policy="Background")
    return took


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--members", type=int, default=6)
    args = ap.parse_args(argv)
    ensure_binaries(["etcd", "kubernetes", "kwok"], log=sys.stderr)
    with LocalCluster() as cluster, tempfile.TemporaryDirectory() as work:
        api = cluster.api_client()
        client.CoreV1Api(api).create_node(node_manifest("bench-0", kwok_taint=False, cpu="64", memory="64Gi",
                                                        pods=250))
        stack = CogateStack(cluster, Path(work))
        stack.start()
        try:
            times: dict[str, list[float]] = {"validated": [], "not validated": []}
            for i in range(args.runs):
                for mode, flags in (("validated", ("--validate-releases=always",)),
                                    ("not validated", ("--validate-releases=never",))):
                    stack.controller_args = flags
                    stack.restart_controller()
                    times[mode].append(one_release(api, f"bench-{i}-{len(times[mode])}-{mode[:3]}", args.members))
            med = {m: statistics.median(v) for m, v in times.items()}
            for m, v in times.items():
                print(f"{m:>14}: median {med[m] * 1000:7.1f} ms  runs {' '.join(f'{x * 1000:.0f}' for x in v)}")
            print(f"ratio validated / not validated: {med['validated'] / med['not validated']:.2f} "
                  f"({args.members} members, {args.runs} runs each, alternating)")
        finally:
            stack.stop()
            api.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
