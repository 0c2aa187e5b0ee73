"""Benchmark 6a (issue 10): the controller's memory with big caches, no cluster.

A child process (bench/_memory_feed.py) imports what the controller imports, then fills
the controller's four informer caches through the watch-event path (``Informer`` with
the controller's keys and converters; every object a decoded JSON watch line): N kwok-like
nodes, M PodGroup members (members cache), P bound pods (bound-pods cache; the members are
among them, as in the controller, so they are cached twice) and M/8 PodGroups; then runs
one planning pass over the caches. It reports its RSS (``VmRSS``) at each step, its peak
RSS, and what one cached pod record is made of.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

NAME = "controller_memory"
TITLE = "Controller memory"
NEEDS_CLUSTER = False
BENCH_DIR = Path(__file__).resolve().parent
MiB = 2**20

TARGET_MB = 400.0
FULL = {"nodes": 5_000, "pods": 100_000, "members": 10_000}
QUICK = {"nodes": 50, "pods": 2_000, "members": 200}


def run(quick: bool, out_dir: Path) -> dict[str, Any]:
    size = QUICK if quick else FULL
    argv = [sys.executable, str(BENCH_DIR / "_memory_feed.py"), "--nodes", str(size["nodes"]),
            "--pods", str(size["pods"]), "--members", str(size["members"])]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=1800, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"_memory_feed.py failed ({out.returncode}): {out.stderr[-3000:]}")
    res = json.loads(out.stdout)
    points = res["points"]
    base = points[0]["rss"]
    final = points[-1]["rss"]
    with_pods = next(p for p in points if p["step"].endswith("bound pods") and p["pods"] == size["pods"])
    first_pods = next(p for p in points if p["step"].endswith("members cache)"))
    per_pod_rss = (with_pods["rss"] - first_pods["rss"]) / size["pods"]
    rows = [[p["step"], p["pods"], round(p["rss"] / MiB, 1), round((p["rss"] - base) / MiB, 1)] for p in points]
    rows.append(["peak (high-water mark)", size["pods"], round(res["peak"] / MiB, 1), round((res["peak"] - base) / MiB, 1)])
    fields = sorted(res["per_pod_bytes_by_field"].items(), key=lambda kv: -kv[1])
    total = res["per_pod_bytes"]
    field_rows = [[k, round(v), round(v / total, 3)] for k, v in fields if v >= 1]
    met = final / MiB <= TARGET_MB
    top = ", ".join(f"{k} {v:,.0f} B ({v / total:.0%})" for k, v in fields[:4])
    explanation = ""
    if not met:
        explanation = (
            f"Missed by {final / MiB - TARGET_MB:.0f} MB. The caches cost {per_pod_rss:,.0f} bytes of RSS per "
            f"bound pod; one PodInfo record holds {total:,.0f} bytes of objects, mostly: {top}. The records "
            "keep their own copy of data most pods share: each pod's tolerations are new Toleration dataclass "
            "instances (with __dict__) and new strings even when identical to the next pod's (the two default "
            "not-ready/unreachable tolerations are on nearly every pod); label keys and values, namespace, "
            "phase, scheduler name and node name are new strings per pod; an empty nodeSelector is a new "
            "dict + MappingProxy. Sharing equal values when converting (strings interned; equal tuples, e.g. "
            "of tolerations, and equal mappings replaced by one canonical object) would bring a record to "
            f"{res['per_pod_bytes_shared']:,.0f} bytes (measured on copies of 2,000 cached records), about "
            f"{(total - res['per_pod_bytes_shared']) * size['pods'] / MiB:,.0f} MB less at this size. Not "
            "applied: controller/model/records.py is outside this benchmark's scope."
        )
    plot = _plot(points, size, out_dir / "controller_memory.png")
    return {
        "name": NAME,
        "title": TITLE,
        "what": (
            f"RSS of a process holding the controller's informer caches: {size['nodes']:,} kwok-like nodes "
            f"({res['node_json_bytes']:,} bytes of JSON each: labels, taint, conditions, 8 images), "
            f"{size['pods']:,} bound pods ({res['pod_json_bytes']:,} bytes of JSON each: 2 containers, env, "
            f"probes, volumes, tolerations, status), of which {size['members']:,} are PodGroup members (also in "
            f"the members cache), and {size['members'] // 8:,} PodGroups. Every object arrives as a decoded watch "
            "event through controller.informer.Informer with the controller's converters (model.node_info, "
            "records.pod_info, inputs.group_object); then one planning pass (planner.decide) runs over the "
            "caches. RSS after gc.collect() at each step."
        ),
        "baseline": "the same interpreter with the controller's modules (and the kubernetes client) imported and "
                    "no objects, same run.",
        "tables": [
            {"caption": "RSS at each step (MB = MiB). Delta = over the baseline (first row).",
             "columns": ["step", "bound pods", "RSS MB", "delta MB"], "rows": rows},
            {"caption": f"One cached pod record (PodInfo): {total:,.0f} bytes of objects, by field (objects "
                        "shared between records counted once).",
             "columns": ["field", "bytes per pod", "share"], "rows": field_rows},
        ],
        "plots": [plot],
        "targets": [{
            "what": f"controller RSS with {size['nodes']:,} nodes and {size['pods']:,} pods cached, after a pass",
            "target": f"<= {TARGET_MB:.0f} MB",
            "measured": f"{final / MiB:.0f} MB ({final / base:.1f}x the {base / MiB:.0f} MB baseline; "
                        f"{per_pod_rss:,.0f} B per pod; peak {res['peak'] / MiB:.0f} MB)",
            "met": met,
            "explanation": explanation,
        }],
        "notes": [
            f"Feeding every object through the informer took {res['feed_seconds']:.1f} s "
            f"({res['feed_seconds'] / (size['nodes'] + size['pods'] + size['members']) * 1e6:.0f} µs per object, "
            "JSON decoding included).",
            f"One cached node record (NodeInfo) holds {res['per_node_bytes']:,.0f} bytes of objects.",
            f"With equal values shared (interned strings, canonical tuples and mappings) a pod record would hold "
            f"{res['per_pod_bytes_shared']:,.0f} bytes instead of {total:,.0f} (measured on copies).",
        ] + (["Quick mode: small sizes; the target is judged on them only to keep the report's shape."]
             if quick else []),
    }


def _plot(points: list[dict[str, Any]], size: dict[str, int], path: Path) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    pod_points = [p for p in points if p["step"].endswith("bound pods")]
    start = next(p for p in points if p["step"].endswith("members cache)"))
    xs = [0] + [p["pods"] for p in pod_points]
    ys = [start["rss"] / MiB] + [p["rss"] / MiB for p in pod_points]
    ax.plot(xs, ys, marker="o", label="controller caches (RSS)")
    ax.axhline(points[0]["rss"] / MiB, color="gray", linestyle="--", label="baseline: modules imported")
    ax.axhline(TARGET_MB, color="red", linestyle=":", label=f"target {TARGET_MB:.0f} MB")
    ax.set_xlabel(f"bound pods cached (plus {size['nodes']:,} nodes, {size['members']:,} members)")
    ax.set_ylabel("RSS, MiB")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return {"file": path.name, "caption": "Controller RSS as bound pods fill the caches."}
