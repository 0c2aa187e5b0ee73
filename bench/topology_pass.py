"""Topology-aware planning (issue 32 item 5): the planning pass with and without topology constraints.

Input (built here, no cluster; seeded): 1,024 nodes of 32 CPU / 128 GiB in 4 blocks x 16 racks x 16
nodes (labels ``example.com/block``, ``example.com/rack``), each running bound pods of 4 CPU that
leave 0 to 28 CPU free; 100 waiting PodGroups of 4 to 64 members of 4 CPU, a third each required
rack, required block with preferred rack, preferred rack only. The same groups without annotations
are the baseline, in the same run.

Two passes of the incremental planner (:class:`cogate.controller.planning.planstate.PlanningState`),
each the median of ``--runs``: the **first pass** (a new state) and the **pass after one change**
(one bound pod added, then deleted, alternately). Prints one line per case and the ratio.

    .venv/bin/python -m bench.topology_pass [--runs 5] [--groups 100]
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import statistics
import time

from cogate.api import DEFAULT_GATE_NAME, POD_GROUP_LABEL
from cogate.controller.model.records import NodeInfo, PodInfo
from cogate.controller.planning.planner import GroupRequest, Outcome
from cogate.controller.planning.planstate import PlanningState
from cogate.controller.topology.constraints import HOSTNAME_LABEL, Constraint

BLOCK, RACK = "example.com/block", "example.com/rack"
LEVELS = (BLOCK, RACK, HOSTNAME_LABEL)
Gi = 2**30
NOW = 1_000_000.0


def cluster(seed: int = 1) -> tuple[list[NodeInfo], list[PodInfo]]:
    rng = random.Random(seed)
    nodes, pods = [], []
    for b in range(4):
        for r in range(16):
            for i in range(16):
                name = f"b{b}-r{r}-n{i}"
                nodes.append(NodeInfo(name, {BLOCK: f"b{b}", RACK: f"b{b}-r{r}", HOSTNAME_LABEL: name},
                                      {"cpu": 32_000, "memory": 128 * Gi, "pods": 110}, (), False, True))
                for k in range(rng.choice((1, 2, 4, 6, 8))):
                    pods.append(_pod(f"busy-{name}-{k}", 4_000, node=name))
    return nodes, pods


def _pod(name: str, cpu: int, node: str = "", group: str = "") -> PodInfo:
    return PodInfo(namespace="bench", name=name, uid=name, labels={POD_GROUP_LABEL: group} if group else {},
                   node_name=node, phase="Running" if node else "Pending", requests={"cpu": cpu, "memory": Gi, "pods": 1},
                   gates=() if node else (DEFAULT_GATE_NAME,), created=NOW - 60)


def groups(n: int, topology: bool, seed: int = 2) -> list[GroupRequest]:
    rng = random.Random(seed)
    kinds = (Constraint(LEVELS, required=1), Constraint(LEVELS, required=0, preferred=1), Constraint(LEVELS, preferred=1))
    out = []
    for g in range(n):
        size = rng.choice((4, 8, 16, 32, 64))
        members = tuple(_pod(f"g{g}-{i}", 4_000, group=f"g{g}") for i in range(size))
        r = GroupRequest("bench", f"g{g}", size, NOW - 60 + g, False, members)
        out.append(dataclasses.replace(r, topology=kinds[g % 3]) if topology else r)
    return out


def _median_ms(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def measure(topology: bool, n_groups: int, runs: int) -> dict[str, float]:
    nodes, pods = cluster()
    gs = groups(n_groups, topology)
    first = _median_ms(lambda: PlanningState.build(nodes, pods).decide(gs, [], NOW), runs)
    state = PlanningState.build(nodes, pods)
    decision = state.decide(gs, [], NOW)
    extra = _pod("extra", 500, node=nodes[0].name)
    flip = [True]

    def one_change() -> None:
        if flip[0]:
            state.upsert_pod(extra)
        else:
            state.remove_pod(extra.uid)
        flip[0] = not flip[0]
        state.decide(gs, [], NOW)

    after = _median_ms(one_change, runs)
    released = sum(1 for v in decision.verdicts if v.outcome == Outcome.RELEASED)
    return {"first_ms": first, "after_change_ms": after, "released": released}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.topology_pass", description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--groups", type=int, default=100)
    args = p.parse_args(argv)
    base = measure(False, args.groups, args.runs)
    topo = measure(True, args.groups, args.runs)
    for name, m in (("without topology", base), ("with topology", topo)):
        print(f"{name:>17}: first pass {m['first_ms']:8.1f} ms, after one change {m['after_change_ms']:8.1f} ms, "
              f"released {m['released']} of {args.groups}")
    print(f"ratio (with / without): first pass {topo['first_ms'] / base['first_ms']:.2f}x, "
          f"after one change {topo['after_change_ms'] / base['after_change_ms']:.2f}x (target <= 2x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
