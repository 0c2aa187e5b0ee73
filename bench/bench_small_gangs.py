"""Issue 40 item 3: many small gangs, against kube-scheduler alone and Kubernetes' own gang scheduling.

Most gang jobs in a busy cluster are small (2 to 16 pods). This benchmark times, from the first
create call until a pod watch sees the expected pods bound (``clusterbench.PodWatch``):

- **sub-second groups**, each workload run ``REPEATS`` times (median): the README example (one
  node of 10 CPU; 6 pods of 3 CPU, minMember 3: 3 can run), and one group of 2, 4 and 8 members
  of 100m on 10 nodes of 4 CPU; through cogate (its PodGroup first, then the ReplicaSet),
  kube-scheduler alone (the same ReplicaSet unlabelled, same control plane) and native gang
  scheduling (a ``scheduling.k8s.io/v1beta1`` PodGroup, the members naming it; its own control plane);
- **100 groups of 8** (100 ReplicaSets of 8 x 100m, created at once, each with its PodGroup) on
  100 and on 29 nodes of 4 CPU, through cogate and kube-scheduler alone (the same ReplicaSets
  unlabelled), with ``bench_end_to_end.run_once`` (creation, decision and release timeline; each
  group's own path from its last member's creation to its decision, last gate and last bind:
  ``bench_end_to_end.per_group``).

Every control plane is v1.37.2 with ``GenericWorkload`` on (the release whose native gang
scheduling is compared: ``bench_native``). cogate runs in both admission modes of the chart
(``admission.mode``), switched between runs: ``webhook`` registered as the chart registers it by
default (no late-label entry, :func:`cogate.webhook.config.webhook_configuration` with
``late_labels=None``) and ``policy`` (:func:`cogate.webhook.policies.admission_policies`, no
webhook call). Every object selects the label, so "kube-scheduler alone" pays nothing for cogate
being installed.

    python bench/bench_small_gangs.py [--quick]       # prints RESULT <json>
    python bench/bench_small_gangs.py --requests [RUNS] # prints REQUESTS <json>: cogate's own requests per
                                                        # group, its status writes by kind (:func:`write_kind`)
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from kubernetes import client

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_admission_rate as adm  # noqa: E402
import bench_end_to_end as e2e  # noqa: E402
import bench_native as nat  # noqa: E402
import clusterbench as cb  # noqa: E402

NAME = "small_gangs"
TITLE = "Many small gangs: sub-second groups and 100 groups of 8 against kube-scheduler alone and native"
NEEDS_CLUSTER = True
REPEATS = 5
#: (label, nodes, node shape, members, minMember, cpu, memory, expected bound)
SMALL = (("README example (6 x 3 CPU, minMember 3)", 1, nat.README_NODE, 6, 3, "3", "500Mi", 3),
         ("1 group of 2", 10, nat.NODE_4CPU, 2, 2, "100m", "64Mi", 2),
         ("1 group of 4", 10, nat.NODE_4CPU, 4, 4, "100m", "64Mi", 4),
         ("1 group of 8", 10, nat.NODE_4CPU, 8, 8, "100m", "64Mi", 8))
MANY = ((100, 100, 8), (29, 100, 8))
GROUPS = 100  # groups per MANY run (the per-group request counts divide by it)
QUICK_MANY = (10, 4, 8)  # --quick: nodes, groups, size
TARGET_ALONE = 1.10  # issue 40: 100 groups of 8 <= 1.10x of kube-scheduler alone
TARGET_NATIVE = 1.5  # issue 40: the README example <= 1.5x of native


#: cogate's set-ups: system name -> registration of ``bench_admission_rate.register`` ("late-off": the
#: chart's default webhook registration; "policy": chart ``admission.mode: policy``). ``pregated``: the
#: webhook registered by default, the members' templates carrying cogate's gate (the webhook's match
#: condition skips them: docs/semantics.md, Admission).
MODES = {"cogate": "late-off", "pregated": "late-off", "policy": "policy"}
#: Every system of the cogate control plane, in the order the 100 x 8 runs alternate.
SYSTEMS = ("alone", "cogate", "pregated", "policy")
#: How the report names each cogate set-up.
SHOWN = {"cogate": "webhook", "pregated": "pre-gated", "policy": "policies"}
#: The controller's requests per group reported (``clusterbench.STATS`` keys; issue 40).
REQUEST_KEYS = ("status writes", "owner reads", "events", "events WaitingForMembers", "events Released",
                "events InsufficientCapacity", "gates removed")
#: The steps of each group's path in ``bench_end_to_end.per_group``, from its last member's creation.
PATH_STEPS = ("decision recorded", "last gate removed", "last bound")
#: ... and inside the controller, from the member event that completed the group
#: (``cogate_controller_arrival_to_release_seconds`` by step, its mean over the run).
CONTROLLER_STEPS = ("pass started", "planned", "released")


#: Counts of a PodGroup's status (the printed columns of ``kubectl get pg``).
COUNT_FIELDS = ("scheduled", "running", "succeeded", "failed")


def write_kind(old: dict[str, Any] | None, new: dict[str, Any]) -> str:
    """What a PodGroup status write changed, from the status before (``old``, ``None``: none seen) to
    the one after (API JSON): ``first``, ``release`` (``scheduleStartTime`` set), ``members gone`` (a
    count falling: the teardown of a run deletes the pods), ``phase <Phase>``,
    ``condition`` (a condition's type, status or reason), ``counts <fields>`` (count fields only, with
    or without numbers in condition messages), ``message`` (condition messages only)."""
    if not old:
        return "first"
    if new.get("scheduleStartTime") and not old.get("scheduleStartTime"):
        return "release"
    if any((new.get(k) or 0) < (old.get(k) or 0) for k in COUNT_FIELDS):
        return "members gone"  # the run's teardown deletes the pods: not part of the workload
    if new.get("phase") != old.get("phase"):
        return f"phase {new.get('phase')}"
    def said(s: dict[str, Any]) -> set[tuple]:
        return {(c.get("type"), c.get("status"), c.get("reason")) for c in s.get("conditions") or ()}
    if said(old) != said(new):
        return "condition"
    counts = [k for k in COUNT_FIELDS if old.get(k) != new.get(k)]
    return "counts " + "+".join(counts) if counts else "message"


class StatusLog(cb.PodGroupWatch):
    """A :class:`clusterbench.PodGroupWatch` that also keeps every distinct status each group was
    seen with (``seen[(namespace, name)]``: a list of ``(time.monotonic(), status)``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.seen: dict[tuple[str, str], list[tuple[float, dict[str, Any]]]] = {}

    def _observe(self, obj: dict[str, Any], t: float) -> None:
        super()._observe(obj, t)
        meta = obj.get("metadata") or {}
        status = obj.get("status") or {}
        with self.lock:
            past = self.seen.setdefault((meta.get("namespace", ""), meta.get("name", "")), [])
            if status and (not past or past[-1][1] != status):
                past.append((t, status))

    def kinds(self, namespace: str) -> dict[str, float]:
        """Status writes of ``namespace``'s groups by :func:`write_kind`, per group (a kind seen after the
        release prefixed ``after release:``), and ``total`` (but ``members gone``)."""
        counts: dict[str, int] = {}
        with self.lock:
            logs = [v for (ns, _), v in self.seen.items() if ns == namespace]
        for log in logs:
            released, old = False, None
            for _, status in log:
                kind = write_kind(old, status)
                key = f"after release: {kind}" if released and kind != "release" else kind
                counts[key] = counts.get(key, 0) + 1
                released = released or bool(status.get("scheduleStartTime"))
                old = status
        n = max(len(logs), 1)
        out = {k: round(v / n, 2) for k, v in sorted(counts.items())}
        out["total"] = round(sum(v for k, v in counts.items() if not k.endswith("members gone")) / n, 2)
        return out


def _register(cluster: Any, stack: Any, system: str) -> None:
    """Register cogate as the chart does for ``system`` (:data:`MODES`); ``alone`` keeps the last one
    (unlabelled pods reach neither the webhook nor the policies: every object selects the label)."""
    if system in MODES:
        adm.register(cluster, stack, MODES[system])


def _small_once(api: client.ApiClient, watch: cb.PodWatch, system: str, w: tuple, rep: int,
                timeout: float, gate: str | None = None) -> float | None:
    label, _, _, size, min_member, cpu, memory, expect = w
    ns = cb.new_namespace(api, f"{system[:3]}-s")
    name = f"g{rep}"
    try:
        group = nat.Group(name, min_member, (nat.Part(name, size, cpu, memory),))
        if system in MODES:
            cb.create_pod_group(api, ns, cb.pod_group(name, min_member))
        elif system == "native":
            client.CustomObjectsApi(api).create_namespaced_custom_object(
                nat.NATIVE_GROUP, nat.NATIVE_VERSION, ns, nat.NATIVE_PLURAL, nat.native_pod_group(group, None),
                _preload_content=False)
        if system == "alone":
            body = cb.replica_set(name, size, group=None, cpu=cpu, memory=memory)
        else:
            body = nat.replica_set("cogate" if system in MODES else system, group, group.parts[0], None)
        if system == "pregated":
            body = cb.pre_gated(body, gate)
        t0 = time.monotonic()
        cb.create_replica_set(api, ns, body)
        try:
            return watch.wait_bound(ns, expect, timeout) - t0
        except TimeoutError:
            return None
    finally:
        cb.delete_namespace(api, ns)


def _small(api: client.ApiClient, cluster: Any, system: str, quick: bool,
           stack: Any = None) -> dict[str, list[float | None]]:
    out: dict[str, list[float | None]] = {}
    if stack is not None:
        _register(cluster, stack, system)
    with cb.PodWatch(api) as watch:
        for w in SMALL[:2] if quick else SMALL:
            cb.set_nodes(cluster, w[1], **w[2])
            out[w[0]] = [_small_once(api, watch, system, w, r, 30 if quick else 120,
                                     stack.gate_name if stack is not None else None)
                         for r in range(2 if quick else REPEATS)]
            cb.log(f"{NAME}: {system}: {w[0]}: {out[w[0]]}")
    return out


def _cogate_plane(quick: bool) -> tuple[dict[str, dict[str, list]], dict[str, Any]]:
    small: dict[str, dict[str, list]] = {}
    many: dict[str, Any] = {}
    with cb.control_plane(kubernetes_version=nat.RELEASE, feature_gates=nat.GATES) as c:
        api = cb.api_client(c)
        with cb.cogate_stack(c) as stack:
            for system in SYSTEMS:
                small[system] = _small(api, c, system, quick, stack)
            with cb.PodWatch(api) as watch, cb.PodGroupWatch(api) as pg_watch:
                for nodes, groups, size in (QUICK_MANY,) if quick else MANY:
                    cb.set_nodes(c, nodes, **e2e.NODE_SHAPE)
                    label = f"{groups} groups of {size} on {nodes} nodes"
                    runs = []
                    for system in SYSTEMS * 2:  # each twice, alternating
                        gang = system != "alone"
                        _register(c, stack, system)
                        runs.append(e2e.run_once(api, watch, stack, groups, size, gang, 600, c,
                                                 pg_watch if gang else None,
                                                 pre_gate=stack.gate_name if system == "pregated" else None))
                        cb.log(f"{NAME}: {label}: {system}: {runs[-1]['all bound s']:.2f} s")
                    many[label] = runs
        api.close()
    return small, many


def _native_plane(quick: bool) -> dict[str, list]:
    with cb.control_plane(kubernetes_version=nat.RELEASE, feature_gates=nat.GATES) as c:
        api = cb.api_client(c)
        out = _small(api, c, "native", quick)
        api.close()
    return out


def _med(xs: list[float | None]) -> float | None:
    known = [x for x in xs if x is not None]
    return round(statistics.median(known), 3) if known and len(known) == len(xs) else None


def run(quick: bool, out_dir: Path) -> dict[str, Any]:
    small, many = _cogate_plane(quick)
    small["native"] = _native_plane(quick)
    return _result(small, many, quick)


def _runs(xs: list[float | None]) -> str:
    return ", ".join(f"{x:.2f}" if x is not None else "-" for x in xs)


def _result(small: dict[str, dict[str, list]], many: dict[str, Any], quick: bool) -> dict[str, Any]:
    """The report from the runs' figures (``small``: system -> workload -> seconds per run; ``many``:
    label -> ``bench_end_to_end.run_once`` results, alone, webhook and policies alternating)."""
    rows, targets = [], []
    gangs = SYSTEMS[1:]
    for w in SMALL[:2] if quick else SMALL:
        a, n = _med(small["alone"][w[0]]), _med(small["native"][w[0]])
        t = {s: _med(small[s][w[0]]) for s in gangs}
        rows.append([w[0], w[7], a, *(t[s] for s in gangs), n,
                     *(cb.ratio(t[s], a) if t[s] and a else None for s in gangs),
                     *(cb.ratio(t[s], n) if t[s] and n else None for s in gangs)])
        if w is not SMALL[0]:
            continue
        for system in gangs:
            r = cb.ratio(t[system], n) if t[system] and n else None
            targets.append(cb.target(
                f"creation to bound, {w[0]}, {SHOWN[system]}",
                f"cogate <= {TARGET_NATIVE}x native", f"{r}x ({t[system]} s against {n} s)",
                r is not None and r <= TARGET_NATIVE,
                "Runs (s): " + "; ".join(f"{SHOWN[s]} {_runs(small[s][w[0]])}" for s in gangs) + "; "
                f"native {_runs(small['native'][w[0]])}; kube-scheduler alone {_runs(small['alone'][w[0]])}. "
                "cogate's release needs, after its members are created, a decision pass (due at once when the last "
                "member arrives), the PodGroup status write and the gate removals: API round trips native gang "
                "scheduling does not make; on a machine this loaded each round trip and each process wake-up takes "
                "tens of milliseconds, and the spread between runs of one system is as large as the difference "
                "between systems."))
    many_rows, path_rows, request_rows = [], [], []
    for label, runs in many.items():
        for k, r in enumerate(runs):
            system = ("alone", *(SHOWN[s] for s in SYSTEMS[1:]))[k % len(SYSTEMS)]
            pg = r.get("per group") or {}
            if system != "alone":
                ctl = r.get("controller") or {}
                groups = QUICK_MANY[1] if quick else GROUPS
                request_rows.append([label, system, k // len(SYSTEMS) + 1] + [round(ctl.get(key, 0) / groups, 2)
                                                                   for key in REQUEST_KEYS])
            if system != "alone" and pg:
                ctl, n = r.get("controller") or {}, (r.get("controller") or {}).get("arrivals released") or 0
                path_rows.append([label, system, k // len(SYSTEMS) + 1] + [pg.get(step, {}).get(q) for step in PATH_STEPS
                                                                for q in ("p50", "p90", "max")]
                                 + [round(ctl.get(f"arrival -> {step} s", 0) / n, 3) if n else None
                                    for step in CONTROLLER_STEPS])
        every = len(SYSTEMS)
        med = {s: statistics.median(r["all bound s"] for r in runs[k::every]) for k, s in enumerate(SYSTEMS)}
        made = {s: statistics.median(r["all created s"] for r in runs[k::every]) for k, s in enumerate(SYSTEMS)}
        tl = runs[-1].get("timeline", {})
        many_rows.append([label, *(round(med[s], 2) for s in SYSTEMS), *(cb.ratio(med[s], med["alone"]) for s in gangs),
                          *(round(made[s], 2) for s in SYSTEMS),
                          _round(tl.get("decision recorded")), _round(tl.get("last bound"))])
        for system in gangs:
            r = cb.ratio(med[system], med["alone"])
            targets.append(cb.target(
                f"time until all bound, {label}, {SHOWN[system]}",
                f"cogate <= {TARGET_ALONE}x kube-scheduler alone", f"{r}x", r is not None and r <= TARGET_ALONE,
                f"Creating the 800 members took {round(made[system], 1)} s against {round(made['alone'], 1)} s alone "
                f"(medians), and the decision was recorded {_round(tl.get('decision recorded'))} s after the last "
                "member (last policies run). "
                + ("Pre-gated members skip the webhook (their templates carry the gate), so creating them costs "
                   "what creating unlabelled pods costs; what remains is cogate's release (its status writes and "
                   "one gate-removal patch per member)." if system == "pregated" else
                   "The time goes in creating the members (each labelled create is mutated in kube-apiserver: "
                   "the admission_rate benchmark).")))
    return cb.result(
        NAME, TITLE,
        "Creation to bound (first create call until a pod watch sees the expected pods bound) of the README "
        f"example and of one group of 2, 4 and 8 members ({REPEATS} runs each, median) through cogate with its "
        "webhook, cogate with its webhook and pre-gated members (the ReplicaSets' pod templates carry cogate's "
        "gate, so the webhook's match condition skips them), cogate with its admission policies (chart "
        "admission.mode policy), kube-scheduler alone and kube-scheduler 1.37.2's own gang scheduling; and 100 "
        "groups of 8 created at once on 100 and 29 nodes through the three cogate set-ups and kube-scheduler "
        "alone (two runs each, alternating, median). The webhook registered as the chart does by default (no "
        "late-label entry).",
        "kube-scheduler alone (the same ReplicaSets unlabelled, same control plane, same run) and native gang "
        "scheduling (same release and node shapes, its own control plane, same run).",
        tables=[cb.table("Sub-second groups: creation to bound, median seconds",
                         ["workload", "expected bound", "alone s", *(f"{SHOWN[s]} s" for s in gangs), "native s",
                          *(f"{SHOWN[s]} / alone" for s in gangs), *(f"{SHOWN[s]} / native" for s in gangs)], rows),
                cb.table("100 groups of 8: median seconds",
                         ["workload", "alone: all bound s", *(f"{SHOWN[s]}: all bound s" for s in gangs),
                          *(f"{SHOWN[s]} / alone" for s in gangs), "alone: all created s",
                          *(f"{SHOWN[s]}: all created s" for s in gangs),
                          "policies: last created -> decision recorded s",
                          "policies: last created -> all bound s"], many_rows),
                cb.table("100 groups of 8: each group's path from its last member's creation (seconds over the "
                         "100 groups: median, 90th percentile, maximum)",
                         ["workload", "cogate", "run"] + [f"{step} {q}" for step in PATH_STEPS
                                                          for q in ("p50", "p90", "max")]
                         + [f"controller: arrival -> {step}, mean s" for step in CONTROLLER_STEPS], path_rows),
                cb.table("100 groups of 8: cogate's own API requests per group (the controller's counters over the "
                         "run / 100; issue 40)", ["workload", "cogate", "run"] + list(REQUEST_KEYS), request_rows)],
        targets=targets,
        notes=["raw figures: " + json.dumps({"small": small, "many": {k: [{kk: vv for kk, vv in r.items()
                                                                           if kk != "cpu s"} for r in v]
                                                                      for k, v in many.items()}})])


def _round(x: Any) -> Any:
    return round(x, 2) if isinstance(x, (int, float)) else x


def requests(runs: int = 2, nodes: int = 100, groups: int = 100, size: int = 8) -> dict[str, Any]:
    """cogate's own API requests per group while ``groups`` groups of ``size`` are created at once on
    ``nodes`` nodes (issue 40): the controller's counters (status patches, owner GETs, Events by
    reason, gate patches) divided by ``groups``, per run through cogate (webhook), with the same
    run's creation and bind times and kube-scheduler alone's (alternating, ``runs`` each)."""
    out: dict[str, Any] = {"shape": f"{groups} groups of {size} on {nodes} nodes", "runs": []}
    with cb.control_plane(kubernetes_version=nat.RELEASE, feature_gates=nat.GATES) as c:
        api = cb.api_client(c)
        with cb.cogate_stack(c) as stack, cb.PodWatch(api) as watch, StatusLog(api) as pg_watch:
            cb.set_nodes(c, nodes, **e2e.NODE_SHAPE)
            for system in ("alone", "cogate") * runs:
                gang = system != "alone"
                _register(c, stack, system)
                with pg_watch.lock:
                    namespaces = {ns for ns, _ in pg_watch.seen}
                r = e2e.run_once(api, watch, stack, groups, size, gang, 600, c, pg_watch if gang else None)
                ctl = r.get("controller") or {}
                row = {"system": system, "all created s": round(r["all created s"], 2),
                       "all bound s": round(r["all bound s"], 2),
                       "cpu s": r.get("cpu s")}
                if gang:
                    row["per group"] = {k: round(ctl.get(k, 0) / groups, 2) for k in REQUEST_KEYS}
                    with pg_watch.lock:
                        new = {ns for ns, _ in pg_watch.seen} - namespaces
                    row["status writes seen"] = {ns: pg_watch.kinds(ns) for ns in sorted(new)}
                out["runs"].append(row)
                cb.log(f"{NAME}: requests: {row}")
        api.close()
    return out


if __name__ == "__main__":
    if sys.argv[1:2] == ["--requests"]:  # cogate's own requests per group (issue 40): prints REQUESTS <json>
        print("REQUESTS " + json.dumps(requests(int(sys.argv[2]) if len(sys.argv) > 2 else 2)))
    else:
        cb.main(run)
