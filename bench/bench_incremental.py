"""Planning pass, incremental (controller/planstate.py) against from scratch (planner.decide).

Issue 10's scenario: N nodes of 32 CPU / 128 GiB / 110 pods each running 20 bound pods of
1,500m / 4 GiB (2 CPU left per node); G waiting groups of 8 x 4 CPU (InsufficientCapacity)
plus one group of 2 x 500m that fits (Released). Two kinds of pass: *steady* (no change since
the previous pass) and *after one change* (a 500m pod bound to a node, then deleted,
alternately). Both planners run in the same process on the same input; every incremental
decision is checked equal to ``decide``'s. Prints medians (ms) and the ratio incremental /
from scratch.

    .venv/bin/python bench/bench_incremental.py [--nodes 100 1000 5000] [--groups 1 10 100 300] [--runs 7]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

from cogate.api import DEFAULT_GATE_NAME, POD_GROUP_LABEL
from cogate.controller.records import NodeInfo, PodInfo
from cogate.controller.planner import GroupRequest, Outcome, PlannerConfig, decide
from cogate.controller.planstate import PlanningState

Gi = 2**30
NOW = 1_000_000.0


def cluster(n: int) -> tuple[list[NodeInfo], list[PodInfo]]:
    nodes = [NodeInfo(f"node-{i:05d}", labels={"kubernetes.io/hostname": f"node-{i:05d}"},
                      allocatable={"cpu": 32_000, "memory": 128 * Gi, "pods": 110}) for i in range(n)]
    pods = [PodInfo("load", f"p-{i}-{j}", f"uid-p-{i}-{j}", labels={"app": f"load-{j}"}, node_name=nd.name,
                    phase="Running", requests={"cpu": 1_500, "memory": 4 * Gi}, created=NOW - 3600)
            for i, nd in enumerate(nodes) for j in range(20)]
    return nodes, pods


def group(name: str, members: int, cpu: int, created: float) -> GroupRequest:
    ms = tuple(PodInfo("ml", f"{name}-{k}", f"uid-{name}-{k}", labels={POD_GROUP_LABEL: name},
                       requests={"cpu": cpu, "memory": 8 * Gi}, gates=(DEFAULT_GATE_NAME,), created=created + k * 0.001)
               for k in range(members))
    return GroupRequest("ml", name, members, created, False, ms)


def groups(g: int) -> list[GroupRequest]:
    return [group(f"big-{i:03d}", 8, 4_000, NOW - 60 + i * 0.01) for i in range(g)] + [group("small", 2, 500, NOW - 30)]


def events(nodes: list[NodeInfo]):
    for k in itertools.count():
        pod = PodInfo("churn", f"c-{k}", f"uid-c-{k}", node_name=nodes[(k * 7919) % len(nodes)].name,
                      phase="Running", requests={"cpu": 500, "memory": Gi}, created=NOW - 1)
        yield "ADDED", pod
        yield "DELETED", pod


class IncrementalPlanner:
    """The planner-under-test adapter of bench/planning_pass.py (``CANDIDATE``): built once from
    the snapshot (not timed), then ``steady()`` and ``after_one_change(event)`` (an informer
    delta of the bound-pods cache with ``kind``, ``old``, ``new``) each run one pass."""

    label = "incremental (planstate.PlanningState)"

    def __init__(self, nodes, pods, groups, reservations, now, config) -> None:  # noqa: ANN001
        self.state = PlanningState.build(nodes, pods)
        self.groups = list(groups)
        self.reservations = list(reservations)
        self.now = now
        self.config = config

    def steady(self):
        return self.state.decide(self.groups, self.reservations, self.now, self.config)

    def after_one_change(self, event):
        if event.kind == "DELETED":
            self.state.remove_pod(event.old.uid)
        else:
            self.state.upsert_pod(event.new)
        return self.steady()


def median_ms(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[100, 1000, 5000])
    ap.add_argument("--groups", type=int, nargs="+", default=[1, 10, 100, 300])
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    cfg = PlannerConfig()
    print(f"{'nodes':>6} {'groups':>6} | {'scratch steady':>14} {'incr steady':>11} {'ratio':>7} | "
          f"{'scratch change':>14} {'incr change':>11} {'ratio':>7}")
    for n in args.nodes:
        nodes, pods = cluster(n)
        for g in args.groups:
            gs = groups(g)
            pods_by_uid = {p.uid: p for p in pods}
            state = PlanningState.build(nodes, pods)
            ref = decide(nodes, pods, gs, [], NOW, cfg)
            assert [v.outcome for v in ref.verdicts] == [Outcome.INSUFFICIENT_CAPACITY] * g + [Outcome.RELEASED]
            assert state.decide(gs, [], NOW, cfg) == ref

            def apply(kind: str, pod: PodInfo) -> None:
                if kind == "ADDED":
                    pods_by_uid[pod.uid] = pod
                    state.upsert_pod(pod)
                else:
                    del pods_by_uid[pod.uid]
                    state.remove_pod(pod.uid)

            ev = events(nodes)
            for _ in range(4):  # equal decisions after changes
                apply(*next(ev))
                assert state.decide(gs, [], NOW, cfg) == decide(nodes, list(pods_by_uid.values()), gs, [], NOW, cfg)
            scratch_steady = median_ms(lambda: decide(nodes, list(pods_by_uid.values()), gs, [], NOW, cfg), args.runs)
            incr_steady = median_ms(lambda: state.decide(gs, [], NOW, cfg), args.runs)

            def scratch_change() -> None:
                apply(*next(ev))
                decide(nodes, list(pods_by_uid.values()), gs, [], NOW, cfg)

            def incr_change() -> None:
                apply(*next(ev))
                state.decide(gs, [], NOW, cfg)

            sc = median_ms(scratch_change, args.runs)
            ic = median_ms(incr_change, args.runs)
            print(f"{n:>6} {g:>6} | {scratch_steady:>14.2f} {incr_steady:>11.2f} {incr_steady / scratch_steady:>7.3f} | "
                  f"{sc:>14.2f} {ic:>11.2f} {ic / sc:>7.3f}", flush=True)


if __name__ == "__main__":
    main()
