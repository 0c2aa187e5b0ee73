"""Issue 17 item 7: the planning pass with DRA devices, after one change.

Input (built here, no cluster): N nodes of 32 CPU / 128 GiB / 110 pods, each publishing one
ResourceSlice of 8 devices (one DeviceClass); 7 of each node's devices are allocated to claims
held by bound pods (one pod per device), so one device per node is free. G waiting PodGroups of
8 members, each member with its own ResourceClaim asking for 2 devices: no node has 2 free, so
every group waits (``InsufficientCapacity``), as in the planning-pass benchmark.

The pass is the controller's: the devices room (:class:`cogate.controller.devices.room.Devices`,
over informers holding the slices, the class and the claims) fills in the members' device requests
and puts the nodes' and bound pods' devices into the planning state, then
``PlanningState.decide``. "After one change" (the target): the free device of node n0 taken by a
pod bound there, its claim allocated (a claims and a bound-pods informer delta), then given back,
alternately, then a pass; no member fits n0 either way. "Usable change" (context): a pod holding
a device deleted with its claim deallocated, then both back: n0 then has room for a member, so
every waiting gang is planned again (in both runs).

Baseline, same run, same machine: the same pass on the same cluster with the devices served by a
device plugin instead (node allocatable ``example.com/gpu: 8``, each bound pod requesting 1, each
member 2, no DRA objects), so the ratio is what modelling DRA adds over a plain extended resource.
"""

from __future__ import annotations

import datetime as _dt
import statistics
import time
from pathlib import Path
from typing import Any

from cogate.api import DEFAULT_GATE_NAME, POD_GROUP_LABEL
from cogate.controller.devices import records as devices
from cogate.controller.model import records
from cogate.controller.devices.room import Devices
from cogate.controller.kube.informer import Informer, name_key, namespaced_key, uid_key
from cogate.controller.planning.planstate import PlanningState
from cogate.controller.planning.planner import GroupRequest, Outcome, PlannerConfig

NAME = "devices_pass"
TITLE = "Planning pass with DRA devices"
NEEDS_CLUSTER = False

DRIVER = "gpu.example.com"
#: The baseline's devices: a device plugin's extended resource (node allocatable, pod requests).
PLUGIN_RESOURCE = "example.com/gpu"
DEVICES_PER_NODE = 8
HELD_PER_NODE = 7
MEMBERS = 8
DEVICES_PER_MEMBER = 2
NOW = 1_000_000.0
TARGET_NODES, TARGET_GROUPS, TARGET_MS = 1_000, 100, 20.0
FULL = ((100, 10), (1_000, 10), (1_000, 100))
QUICK = ((20, 2), (60, 5))


def _informer(name: str, items: list[dict], key, convert) -> Informer:
    inf = Informer(name, lambda: (items, "1"), lambda rv: iter(()), key, convert)
    inf._relist()
    return inf


def _node(i: int, plugin: bool) -> dict:
    allocatable = {"cpu": "32", "memory": "128Gi", "pods": "110"}
    if plugin:
        allocatable[PLUGIN_RESOURCE] = str(DEVICES_PER_NODE)
    return {"metadata": {"name": f"n{i}", "resourceVersion": "1", "labels": {"kubernetes.io/hostname": f"n{i}"}},
            "status": {"allocatable": allocatable, "conditions": [{"type": "Ready", "status": "True"}]}}


def _pod(name: str, *, node: str = "", group: str = "", claim: str = "", created: int = 0, plugin: int = 0) -> dict:
    requests = {"cpu": "500m"}
    if plugin:
        requests[PLUGIN_RESOURCE] = str(plugin)
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": requests, "limits": {
        k: v for k, v in requests.items() if k == PLUGIN_RESOURCE}}}]}
    if node:
        spec["nodeName"] = node
    else:
        spec["schedulingGates"] = [{"name": DEFAULT_GATE_NAME}]
    if claim:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    meta: dict[str, Any] = {"name": name, "namespace": "bench", "uid": f"uid-{name}", "resourceVersion": "1",
                            "creationTimestamp": _dt.datetime.fromtimestamp(NOW - 60 + created, _dt.timezone.utc)
                            .strftime("%Y-%m-%dT%H:%M:%SZ"),
                            "labels": {POD_GROUP_LABEL: group} if group else {}}
    if group:
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": group, "uid": f"j-{group}",
                                    "controller": True}]
    return {"metadata": meta, "spec": spec, "status": {"phase": "Running" if node else "Pending"}}


def _claim(name: str, count: int, allocated: str = "", device: str = "", holder: str = "") -> dict:
    status: dict[str, Any] = {}
    if allocated:
        status = {"allocation": {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": allocated,
                                                          "device": device}]}},
                  "reservedFor": [{"resource": "pods", "name": holder, "uid": f"uid-{holder}"}]}
    return {"metadata": {"name": name, "namespace": "bench", "resourceVersion": "1"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER,
                                                                          "count": count}}]}},
            "status": status}


class Scenario:
    """The cluster of the module doc, as informers, and the pass over it (``dra``: with devices)."""

    def __init__(self, n_nodes: int, n_groups: int, dra: bool) -> None:
        nodes = [_node(i, not dra) for i in range(n_nodes)]
        bound, claims, slices = [], [], []
        for i in range(n_nodes):
            slices.append({"metadata": {"name": f"n{i}-gpu", "resourceVersion": "1"},
                           "spec": {"driver": DRIVER, "nodeName": f"n{i}",
                                    "pool": {"name": f"n{i}", "generation": 1, "resourceSliceCount": 1},
                                    "devices": [{"name": f"gpu-{j}", "attributes": {"index": {"int": j}}}
                                                for j in range(DEVICES_PER_NODE)]}})
            for j in range(HELD_PER_NODE):
                name = f"w-{i}-{j}"
                bound.append(_pod(name, node=f"n{i}", claim=f"c-{name}" if dra else "", plugin=0 if dra else 1))
                claims.append(_claim(f"c-{name}", 1, f"n{i}", f"gpu-{j}", name))
        members, self.groups = [], []
        for g in range(n_groups):
            for m in range(MEMBERS):
                name = f"g{g}-{m}"
                members.append(_pod(name, group=f"g{g}", claim=f"c-{name}" if dra else "", created=g,
                                    plugin=0 if dra else DEVICES_PER_MEMBER))
                claims.append(_claim(f"c-{name}", DEVICES_PER_MEMBER))
        self.members = _informer("members", members, uid_key, records.pod_info)
        self.bound = _informer("bound", bound, uid_key, records.pod_info)
        self.nodes = _informer("nodes", nodes, name_key, records.node_info)
        dclass = {"metadata": {"name": DRIVER, "resourceVersion": "1"},
                  "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}
        self.claims = _informer("claims", claims, namespaced_key, devices.device_claim_info)
        if dra:
            self.devices = Devices(_informer("slices", slices, name_key, devices.slice_info),
                                   _informer("classes", [dclass], name_key, devices.device_class_info),
                                   self.claims,
                                   _informer("templates", [], namespaced_key, devices.claim_template_info),
                                   self.nodes, self.bound)
        else:
            self.devices = Devices(None, None, None, None, self.nodes, self.bound)
        self.planning = PlanningState()
        self.bound.add_handler(self._on_bound)
        for n in self.nodes.snapshot():
            self.planning.upsert_node(self.devices.node(n))
        for p in self.bound.snapshot():
            self.planning.upsert_pod(self.devices.bound_pod(p))
        self.changing = bound[0]
        self.dra = dra
        self._held_claim = claims[0]
        self._free_claim = {**claims[0], "metadata": {**claims[0]["metadata"], "resourceVersion": "2"},
                            "status": {}}
        self._gone = False
        # The spare device of n0 taken and given back: a pod bound there (with DRA, its claim allocated)
        self._spare = _pod("x", node="n0", claim="c-x" if dra else "", plugin=0 if dra else 1)
        self._spare_claims = (_claim("c-x", 1, "n0", f"gpu-{HELD_PER_NODE}", "x"), _claim("c-x", 1))
        if dra:
            self.claims._handle_event({"type": "ADDED", "object": self._spare_claims[1]})
        self._taken = False
        self.config = PlannerConfig()

    def _on_bound(self, kind: str, old: Any, new: Any) -> None:
        if new is not None:
            self.planning.upsert_pod(self.devices.bound_pod(new))
        elif old is not None:
            self.planning.remove_pod(old.uid)

    def one_pass(self):
        labelled = self.devices.resolve(self.members.snapshot(), self.planning)
        by_group: dict[str, list] = {}
        for p in labelled:
            by_group.setdefault(p.labels[POD_GROUP_LABEL], []).append(p)
        requests = [GroupRequest("bench", g, MEMBERS, 0.0, False, tuple(ms)) for g, ms in by_group.items()]
        return self.planning.decide(requests, (), NOW, self.config)

    def change_unusable(self) -> None:
        """n0's free device taken by a pod bound there (with DRA, its claim allocated first), or
        given back: no waiting member (2 devices each) fits n0 either way."""
        if self.dra:
            self.claims._handle_event({"type": "MODIFIED", "object": self._spare_claims[1 if self._taken else 0]})
        self.bound._handle_event({"type": "DELETED" if self._taken else "ADDED", "object": self._spare})
        self._taken = not self._taken

    def change(self) -> None:
        """The holder of a device goes (its pod deleted and, with DRA, its claim deallocated, as the
        resourceclaim controller does), or comes back: one device more or less free on one node."""
        self.bound._handle_event({"type": "ADDED" if self._gone else "DELETED", "object": self.changing})
        if self.dra:
            self.claims._handle_event({"type": "MODIFIED",
                                       "object": self._held_claim if self._gone else self._free_claim})
        self._gone = not self._gone


def _median_ms(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def measure(n_nodes: int, n_groups: int, quick: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"nodes": n_nodes, "groups": n_groups}
    for label, dra in (("base", False), ("dra", True)):
        s = Scenario(n_nodes, n_groups, dra)
        t0 = time.perf_counter()
        d = s.one_pass()  # the first pass: every selector evaluated once per device
        out[f"{label}_first"] = (time.perf_counter() - t0) * 1000
        assert all(v.outcome == Outcome.INSUFFICIENT_CAPACITY for v in d.verdicts), \
            sorted({v.outcome for v in d.verdicts})
        word = "gpu.example.com devices" if dra else PLUGIN_RESOURCE
        assert all(word in v.message for v in d.verdicts), d.verdicts[0].message
        runs = 5 if quick else 15

        def changed():
            s.change_unusable()
            s.one_pass()

        def usable():
            s.change()
            s.one_pass()
        out[f"{label}_steady"] = _median_ms(s.one_pass, runs)
        out[f"{label}_change"] = _median_ms(changed, runs)
        out[f"{label}_usable"] = _median_ms(usable, max(3, runs // 3))
    return out


def run(quick: bool, out_dir: Path) -> dict[str, Any]:
    cells = [measure(n, g, quick) for n, g in (QUICK if quick else FULL)]
    rows = [[c["nodes"], c["nodes"] * DEVICES_PER_NODE, c["groups"], round(c["dra_first"], 1),
             round(c["base_steady"], 2), round(c["dra_steady"], 2), round(c["base_change"], 2),
             round(c["dra_change"], 2), round(c["dra_change"] / c["base_change"], 2),
             round(c["base_usable"], 1), round(c["dra_usable"], 1), round(c["dra_usable"] / c["base_usable"], 2)]
            for c in cells]
    target = next((c for c in cells if (c["nodes"], c["groups"]) == (TARGET_NODES, TARGET_GROUPS)),
                  max(cells, key=lambda c: (c["nodes"], c["groups"])))
    size = f"{target['nodes']:,} nodes x {DEVICES_PER_NODE} devices, {target['groups']} waiting gangs with claims"
    met = target["dra_change"] < TARGET_MS
    return {
        "name": NAME,
        "title": TITLE,
        "what": ("The controller's pass (devices room + incremental planning state) on N nodes publishing "
                 f"{DEVICES_PER_NODE} devices each, {HELD_PER_NODE} of them allocated to bound pods, and G waiting "
                 f"gangs of {MEMBERS} members each claiming {DEVICES_PER_MEMBER} devices (none fits). 'After one "
                 "change': node n0's free device taken by a pod bound there with its claim allocated, or given back "
                 "(the baseline: the pod only), then a pass."),
        "baseline": ("the same pass on the same cluster with the devices as a device plugin's extended resource "
                     "(node allocatable, pod requests; no DRA objects), same run."),
        "tables": [{
            "caption": ("Pass time, ms (median). 'After change': n0's free device taken or given back (no gang "
                        "can use it); 'usable': a device of n0 freed or taken again (every gang may now place a "
                        "member there, so every gang is planned again). Ratios: DRA / device plugin."),
            "columns": ["nodes", "devices", "waiting gangs", "first pass DRA ms", "steady plugin ms",
                        "steady DRA ms", "after change plugin ms", "after change DRA ms", "ratio",
                        "usable plugin ms", "usable DRA ms", "ratio"],
            "rows": rows,
        }],
        "plots": [_plot(cells, out_dir / f"{NAME}.png")],
        "targets": [{
            "what": f"pass after one change, {size}",
            "target": f"< {TARGET_MS:.0f} ms",
            "measured": f"{target['dra_change']:.1f} ms ({target['dra_change'] / target['base_change']:.2f}x the "
                        f"same pass with a device plugin's resource, {target['base_change']:.1f} ms)",
            "met": met,
            "explanation": "" if met else "Missed: see the profile in the note of issue 17.",
        }],
        "notes": ["The first pass evaluates every device class selector once per device (cel-python); later "
                  "passes reuse the results until a slice or class changes."] +
                 ([f"Quick mode: tiny sizes; the target row stands in with {size}."] if quick else []),
    }


def _plot(cells: list[dict[str, Any]], path: Path) -> dict[str, str]:
    """Pass time after one change and after a usable change, DRA against the device plugin, per cell."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.2))
    labels = [f"{c['nodes']:,} nodes\n{c['groups']} gangs" for c in cells]
    xs = range(len(cells))
    width = 0.2
    for j, (key, label) in enumerate((("base_change", "after change, device plugin"),
                                      ("dra_change", "after change, DRA"),
                                      ("base_usable", "usable change, device plugin"),
                                      ("dra_usable", "usable change, DRA"))):
        ax.bar([x + (j - 1.5) * width for x in xs], [c[key] for c in cells], width, label=label)
    ax.axhline(TARGET_MS, color="red", linewidth=0.8, linestyle=":")
    ax.text(-0.4, TARGET_MS * 1.05, f"target {TARGET_MS:.0f} ms after one change at {TARGET_NODES:,} nodes, "
            f"{TARGET_GROUPS} gangs", color="red", fontsize=8)
    ax.set_xticks(list(xs), labels)
    ax.set_ylabel("pass time, ms (median)")
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return {"file": path.name, "caption": "Devices pass time per cluster size: DRA devices against the same devices "
                                          "as a device plugin's extended resource."}


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(run("--quick" in sys.argv, Path("/tmp")), indent=1))
