"""Decision time of cogate.controller.planner.decide.

Scenario: one unreleased PodGroup of M identical members (500m cpu, 512Mi) on N
nodes (32 cores, 128Gi, 110 pods) that already run 20 bound pods each
(250m, 256Mi). Prints the median of a few runs per case and the ratio to the
1-member/100-node baseline measured in the same run. ``--spread``: the members also carry a
hard topology spread constraint (maxSkew 1 on hostname, kube-scheduler PodTopologySpread).

    /work/venv/bin/python bench/bench_planner.py [--runs 5] [--quick] [--spread]
"""

from __future__ import annotations

import argparse
import statistics
import time

from cogate.api import DEFAULT_GATE_NAME, POD_GROUP_LABEL
from cogate.controller.records import LabelSelector, NodeInfo, PodInfo, TopologySpreadConstraint
from cogate.controller.planner import GroupRequest, PlannerConfig, decide

Gi = 2**30
Mi = 2**20


def cluster(n_nodes: int, bound_per_node: int = 20) -> tuple[list[NodeInfo], list[PodInfo]]:
    nodes = [
        NodeInfo(f"node-{i:05d}", labels={"kubernetes.io/hostname": f"node-{i:05d}"},
                 allocatable={"cpu": 32000, "memory": 128 * Gi, "pods": 110})
        for i in range(n_nodes)
    ]
    pods = [
        PodInfo("load", f"p-{i}-{j}", f"p-{i}-{j}", node_name=n.name, phase="Running",
                requests={"cpu": 250, "memory": 256 * Mi})
        for i, n in enumerate(nodes)
        for j in range(bound_per_node)
    ]
    return nodes, pods


def gang(m: int, spread: bool = False) -> GroupRequest:
    tsc = (TopologySpreadConstraint(1, "kubernetes.io/hostname", LabelSelector(((POD_GROUP_LABEL, "train"),))),)
    members = tuple(
        PodInfo("ml", f"w-{k}", f"w-{k}", labels={POD_GROUP_LABEL: "train"}, requests={"cpu": 500, "memory": 512 * Mi},
                gates=(DEFAULT_GATE_NAME,), created=float(k), topology_spread=tsc if spread else ())
        for k in range(m)
    )
    return GroupRequest("ml", "train", m, 0.0, False, members)


def measure(n_nodes: int, m: int, runs: int, spread: bool = False) -> float:
    nodes, pods = cluster(n_nodes)
    g = gang(m, spread)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        d = decide(nodes, pods, [g], [], 1000.0, PlannerConfig())
        times.append(time.perf_counter() - t0)
        assert d.verdicts[0].outcome == "Released", d.verdicts[0]
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="skip the 5000-node cases")
    ap.add_argument("--spread", action="store_true", help="members carry a hard hostname topology spread constraint")
    args = ap.parse_args()
    node_counts = [100, 1000] if args.quick else [100, 1000, 5000]
    member_counts = [1, 64, 1000]
    base = measure(100, 1, args.runs)
    print(f"{'members':>8} {'nodes':>6} {'bound pods':>10} {'median ms':>10} {'x baseline':>10} {'ms/node':>8}")
    for n in node_counts:
        for m in member_counts:
            t = base if (n, m) == (100, 1) and not args.spread else measure(n, m, args.runs, args.spread)
            print(f"{m:>8} {n:>6} {n * 20:>10} {t * 1000:>10.2f} {t / base:>10.1f} {t * 1000 / n:>8.4f}")


if __name__ == "__main__":
    main()
