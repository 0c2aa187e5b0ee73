"""Topology-aware gangs (issue 32 items 1-2), end to end: kwok nodes labelled with blocks and racks, the
session's webhook and controller, the real kube-scheduler. Each rule with several inputs: a required
rack where only one rack fits (all members there, none elsewhere), a required rack nothing holds (all
gated, the message names the best rack and its shortfall), preferred widening to one block, a
heterogeneous gang whose leader needs a node only one rack has, Kueue's pod annotation with no
configuration at all, ``--topology-levels``, an invalid annotation (a Warning event naming it),
slices by completion index of an Indexed Job inside one block, a balanced split, and exclusive gangs
(a rack holding another gang's member refused, later gangs kept out of the exclusive gang's rack
until its pods are deleted, every rack claimed, two exclusive gangs at once, preemption kept out of an
exclusive gang's rack). The file took 95 s on a shared 2-core machine (15 tests, ``--durations``: the
four exclusive ones 11 s of calls together).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client

from cogate.controller.topology import constraints as t
from cogate.localcluster import example
from cogate.localcluster import nodes as fake_nodes

from .kube import condition, controller_flags, create_pod_group, events_for, get_pod_group, group_pods, hold_gated, \
    running, status, wait_for

pytestmark = pytest.mark.e2e

BLOCK, RACK = "example.com/block", "example.com/rack"
LEVELS = f"{BLOCK},{RACK}"


def labelled_nodes(kube, layout: dict[str, dict[str, int]], cpu: str = "4",
                   extended: dict[str, dict[str, int]] | None = None) -> dict[str, tuple[str, str]]:
    """Replace every fake node by ``{block: {rack: count}}`` nodes ``<rack>-<i>`` of ``cpu`` cores,
    labelled with their block and rack (``extended[name]``: extra allocatable); name -> (block, rack)."""
    core = client.CoreV1Api(kube)
    for n in core.list_node(label_selector="type=kwok").items:
        core.delete_node(n.metadata.name)
    wait_for(lambda: not core.list_node(label_selector="type=kwok").items, 60, what="old fake nodes deleted")
    where = {}
    for block, racks in layout.items():
        for rack, count in racks.items():
            for i in range(count):
                name = f"{rack}-{i}"
                where[name] = (block, rack)
                core.create_node(fake_nodes.node_manifest(name, cpu=cpu, memory="16Gi", kwok_taint=False,
                                                          labels={BLOCK: block, RACK: rack},
                                                          extended=(extended or {}).get(name)))

    def ready() -> bool:
        got = {n.metadata.name: kube.sanitize_for_serialization(n) for n in core.list_node(label_selector="type=kwok").items}
        return all(n in got and fake_nodes.node_ready(got[n]) for n in where)

    wait_for(ready, 60, what="labelled nodes Ready")
    time.sleep(0.5)
    wait_for(ready, 30, what="labelled nodes still Ready")
    return where


def gang(kube, ns: str, name: str, size: int, annotations: dict[str, str], cpu: str = "2",
         member_annotations: dict[str, str] | None = None, first: dict[str, Any] | None = None,
         priority_class: str = "") -> None:
    """A PodGroup of minMember ``size`` annotated ``annotations`` and ``size`` members of ``cpu``
    (``first``: spec fields of member 0; ``member_annotations`` on every member)."""
    pg = example.pod_group(name, size, namespace=ns, timeout_seconds=None)
    pg["metadata"]["annotations"] = annotations
    create_pod_group(kube, pg)
    core = client.CoreV1Api(kube)
    for i in range(size):
        tpl = example.pod_template(name, cpu=cpu, memory="100Mi", app=name)
        tpl["metadata"]["name"] = f"{name}-{i}"
        if member_annotations:
            tpl["metadata"]["annotations"] = member_annotations
        if priority_class:
            tpl["spec"]["priorityClassName"] = priority_class
        if i == 0 and first:
            for k, v in first.items():
                if k == "resources":
                    tpl["spec"]["containers"][0]["resources"]["requests"].update(v)
                    tpl["spec"]["containers"][0]["resources"]["limits"].update(v)
                else:
                    tpl["spec"][k] = v
        core.create_namespaced_pod(ns, {"apiVersion": "v1", "kind": "Pod", **tpl})


def placed(kube, ns: str, name: str, size: int, where: dict[str, tuple[str, str]]) -> set[tuple[str, str]]:
    """Once all ``size`` members run: the (block, rack) of each member's node."""
    wait_for(lambda: sum(running(p) for p in group_pods(kube, ns, name)) == size, 60, what=f"{name}: {size} Running")
    return {where[p.spec.node_name] for p in group_pods(kube, ns, name)}


def waiting(kube, ns: str, name: str, *texts: str, reason: str | None = None) -> dict[str, Any]:
    def check():
        c = condition(status(kube, ns, name), "Released")
        return c if c and c["status"] == "False" and all(x in c["message"] for x in texts) \
            and reason in (None, c["reason"]) else None

    try:
        return wait_for(check, 20, what=f"Released=False naming {texts}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; status of {name}: {status(kube, ns, name)}") from None


def test_required_rack_where_only_one_rack_fits(stack, kube, namespace):
    """r2 is the only rack of 8 free cores: the 4 members of 2 cores all run there, none elsewhere;
    a second gang of 4 then fits no rack: all gated, the message names the best rack and what it lacks."""
    where = labelled_nodes(kube, {"b1": {"r1": 1, "r2": 2}, "b2": {"r3": 1}})
    gang(kube, namespace, "one", 4, {t.LEVELS: LEVELS, t.REQUIRED: RACK})
    assert placed(kube, namespace, "one", 4, where) == {("b1", "r2")}
    cond = condition(status(kube, namespace, "one"), "Released")
    assert cond["status"] == "True" and "in rack r2" in cond["message"], cond
    # r2 is full now; r1 and r3 hold 2 members each, and block b1 would not either (r1 + r2 = 2)
    gang(kube, namespace, "two", 3, {t.LEVELS: LEVELS, t.REQUIRED: RACK})
    cond = waiting(kube, namespace, "two", "rack: no rack holds 3", "r1 fits 2 (cpu short by 2",
                   "r3 fits 2", reason="InsufficientCapacity")
    assert "fits 2 of 3" in cond["message"]
    hold_gated(kube, namespace, "two", 3.0, 3)


def test_required_rack_nothing_holds_even_empty(stack, kube, namespace):
    """Racks of 2 nodes (8 cores each): a gang of 5 x 2 cores never fits one; block b1 would."""
    labelled_nodes(kube, {"b1": {"r1": 2, "r2": 2}})
    gang(kube, namespace, "big", 5, {t.LEVELS: LEVELS, t.REQUIRED: RACK})
    cond = waiting(kube, namespace, "big", "rack: no rack holds 5", "r1 fits 4 (cpu short by 2",
                   "block b1 would fit (not allowed: required=rack)", reason="InsufficientCapacity")
    assert cond["message"].startswith("fits 4 of 5 in no allowed domain even with every node empty")
    assert condition(status(kube, namespace, "big"), "FitsCluster")["reason"] == "ExceedsClusterCapacity"
    hold_gated(kube, namespace, "big", 3.0, 5)


def test_preferred_rack_widens_to_the_fewest_racks_of_one_block(stack, kube, namespace):
    """Single-node racks: no rack holds 4 x 2 cores; required block, preferred rack: block b1 (best fit:
    b2's three racks would leave 4 cores) takes all 4, and the message says it is wider than preferred."""
    where = labelled_nodes(kube, {"b1": {"r1": 1, "r2": 1}, "b2": {"r3": 1, "r4": 1, "r5": 1}})
    gang(kube, namespace, "wide", 4, {t.LEVELS: LEVELS, t.REQUIRED: BLOCK, t.PREFERRED: RACK})
    assert {b for b, _ in placed(kube, namespace, "wide", 4, where)} == {"b1"}
    cond = condition(status(kube, namespace, "wide"), "Released")
    assert "in block b1 (wider than the preferred rack" in cond["message"], cond
    wait_for(lambda: [e for e in events_for(kube, namespace, "wide") if e.reason == "Released"
                      and "; in block b1 (wider than the preferred rack" in e.message], 20,
             what="the Released event saying the placement is wider than preferred")
    # a gang that one rack holds stays in one rack
    gang(kube, namespace, "narrow", 2, {t.LEVELS: LEVELS, t.REQUIRED: BLOCK, t.PREFERRED: RACK})
    assert len(placed(kube, namespace, "narrow", 2, where)) == 1


def test_leader_needing_a_node_only_one_rack_has(stack, kube, namespace):
    """The leader asks 1 example.com/gpu, which only r3-0 has; the workers fit r1 or r2 as well: all
    go to r3."""
    where = labelled_nodes(kube, {"b1": {"r1": 2, "r2": 2, "r3": 2}}, extended={"r3-0": {"example.com/gpu": 1}})
    gang(kube, namespace, "led", 4, {t.LEVELS: LEVELS, t.REQUIRED: RACK},
         first={"resources": {"example.com/gpu": "1"}})
    assert placed(kube, namespace, "led", 4, where) == {("b1", "r3")}
    leader = next(p for p in group_pods(kube, namespace, "led") if p.metadata.name == "led-0")
    assert leader.spec.node_name == "r3-0"


def test_kueue_annotation_with_no_levels_configured(stack, kube, namespace):
    """Members carrying kueue.x-k8s.io/podset-required-topology and a PodGroup with no topology annotation:
    a domain is the nodes sharing the label's value, no Topology object, no controller levels."""
    where = labelled_nodes(kube, {"b1": {"r1": 1, "r2": 2}})
    gang(kube, namespace, "kq", 3, {}, member_annotations={t.KUEUE_REQUIRED: RACK})
    assert placed(kube, namespace, "kq", 3, where) == {("b1", "r2")}


def test_controller_levels_and_invalid_annotations(stack, kube, namespace):
    """With --topology-levels a PodGroup names a level alone; a level outside them, or a preferred level
    coarser than the required one, holds the group Unschedulable with a Warning event naming the annotation."""
    where = labelled_nodes(kube, {"b1": {"r1": 1, "r2": 2}})
    with controller_flags(stack, f"--topology-levels={LEVELS}"):
        gang(kube, namespace, "lv", 3, {t.REQUIRED: RACK})
        assert placed(kube, namespace, "lv", 3, where) == {("b1", "r2")}
        gang(kube, namespace, "bad", 2, {t.REQUIRED: RACK, t.PREFERRED: BLOCK})
        cond = waiting(kube, namespace, "bad", "invalid topology annotation: topology.cogate.dev/preferred",
                       reason="Unschedulable")
        assert "coarser than the required" in cond["message"]
        wait_for(lambda: [e for e in events_for(kube, namespace, "bad")
                          if e.type == "Warning" and t.PREFERRED in (e.message or "")], 20,
                 what="a Warning event naming the annotation")
        hold_gated(kube, namespace, "bad", 2.0, 2)


def late_member(kube, ns: str, group: str, name: str, cpu: str = "2") -> None:
    tpl = example.pod_template(group, cpu=cpu, memory="100Mi", app=group)
    tpl["metadata"]["name"] = name
    client.CoreV1Api(kube).create_namespaced_pod(ns, {"apiVersion": "v1", "kind": "Pod", **tpl})


def test_domain_recorded_and_late_members_kept_in_it(stack, kube, namespace):
    """Only r1 holds 3 x 2 cores: each member and the PodGroup are annotated with its domain; a late member goes to r1
    although r2 is empty; the next one waits gated (r1 full) and the status says where it must go."""
    where = labelled_nodes(kube, {"b1": {"r1": 2, "r2": 1}})
    gang(kube, namespace, "home", 3, {t.LEVELS: LEVELS, t.REQUIRED: RACK})
    assert placed(kube, namespace, "home", 3, where) == {("b1", "r1")}
    domain = f"{BLOCK}=b1,{RACK}=r1"
    assert {p.metadata.annotations.get(t.DOMAIN_ANNOTATION) for p in group_pods(kube, namespace, "home")} == {domain}
    pg = get_pod_group(kube, namespace, "home")
    assert pg["metadata"]["annotations"].get(t.DOMAIN_ANNOTATION) == domain, "the chosen domain on the PodGroup"
    late_member(kube, namespace, "home", "home-late")
    assert placed(kube, namespace, "home", 4, where) == {("b1", "r1")}
    late = client.CoreV1Api(kube).read_namespaced_pod("home-late", namespace)
    assert late.metadata.annotations.get(t.DOMAIN_ANNOTATION) == domain
    late_member(kube, namespace, "home", "home-later")
    wait_for(lambda: "new members kept in rack r1" in (condition(status(kube, namespace, "home"), "MembersWaiting")
                                                       or {}).get("message", ""), 20,
             what="MembersWaiting naming the rack")
    time.sleep(2.0)
    later = client.CoreV1Api(kube).read_namespaced_pod("home-later", namespace)
    assert later.spec.scheduling_gates and not later.spec.node_name, "the late member left its rack's fence"


def _run_on(core, namespace, app, priority_class, nodes):
    """A 4-core pod ``<app>-<node>`` of ``priority_class`` bound to each of ``nodes``, Running."""
    for n in nodes:
        tpl = example.pod_template(None, cpu="4", memory="100Mi", app=app)
        tpl["metadata"]["name"] = f"{app}-{n}"
        tpl["spec"].update(priorityClassName=priority_class, nodeName=n)
        core.create_namespaced_pod(namespace, {"apiVersion": "v1", "kind": "Pod", **tpl})
    wait_for(lambda: all(running(core.read_namespaced_pod(f"{app}-{n}", namespace)) for n in nodes),
             30, what=f"{app} pods Running")


def test_preemption_confined_to_the_rack_that_could_hold_the_gang(stack, kube, namespace):
    """r1's two nodes run low-priority pods; r2's one node is empty but can never hold 2 x 4 cores.
    Preemption for the high-priority gang (required rack) takes both victims in r1, where the gang then
    runs; r2 is not used (one victim in r1 plus r2 would be cheaper, and would split the gang)."""
    from .kube import priority_classes

    where = labelled_nodes(kube, {"b1": {"r1": 2, "r2": 1}})
    core = client.CoreV1Api(kube)
    with priority_classes(kube, low=100, high=1000) as names:
        _run_on(core, namespace, "low", names["low"], ("r1-0", "r1-1"))
        gang(kube, namespace, "vip", 2, {t.LEVELS: LEVELS, t.REQUIRED: RACK}, cpu="4", priority_class=names["high"])
        assert placed(kube, namespace, "vip", 2, where) == {("b1", "r1")}
        gone = [p.metadata.name for p in core.list_namespaced_pod(namespace, label_selector="app=low").items
                if not p.metadata.deletion_timestamp]
        assert gone == []


def indexed_job(kube, ns: str, name: str, size: int, annotations: dict[str, str], cpu: str = "2") -> None:
    """A PodGroup of minMember ``size`` annotated ``annotations`` and an Indexed Job of ``size`` pods of
    ``cpu`` labelled for it (the Job controller sets each pod's completion index label)."""
    pg = example.pod_group(name, size, namespace=ns, timeout_seconds=None)
    pg["metadata"]["annotations"] = annotations
    create_pod_group(kube, pg)
    tpl = example.pod_template(name, cpu=cpu, memory="100Mi", app=name)
    tpl["spec"]["restartPolicy"] = "Never"
    client.BatchV1Api(kube).create_namespaced_job(ns, {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"completions": size, "parallelism": size, "completionMode": "Indexed", "template": tpl}})
    wait_for(lambda: len(group_pods(kube, ns, name)) == size, 30, what=f"{size} pods of Job {name}")


def test_slices_by_completion_index_inside_one_block(stack, kube, namespace):
    """Slices of 4 ranks per rack, required block. Block b1 (r1 of 3 nodes, r2 and r3 of 1: 10 members of
    2 cores) would be the best fit without slices, but holds one slice of 4 only; b2 (two racks of 3
    nodes) holds one slice in each rack. A second Job then fits no block in slices: all gated, the
    message names the slice that fits no rack."""
    # rack names of their own: pods of earlier tests' namespaces, deleted in the background, may still
    # be bound to nodes named r1-0 ... and would take room on new nodes of those names
    where = labelled_nodes(kube, {"b1": {"s1": 3, "s2": 1, "s3": 1}, "b2": {"s4": 3, "s5": 3}})
    asked = {t.LEVELS: LEVELS, t.REQUIRED: BLOCK, t.SLICE_SIZE: "4", t.SLICE_LEVEL: RACK}
    indexed_job(kube, namespace, "sl", 8, asked)
    assert {b for b, _ in placed(kube, namespace, "sl", 8, where)} == {"b2"}
    pods = group_pods(kube, namespace, "sl")
    racks: dict[int, set[str]] = {}
    for p in pods:
        racks.setdefault(int(p.metadata.labels["batch.kubernetes.io/job-completion-index"]) // 4, set()).add(
            where[p.spec.node_name][1])
    assert sorted(racks) == [0, 1] and all(len(r) == 1 for r in racks.values()), racks
    assert racks[0] != racks[1], "two slices of 8 cores cannot share a rack of 12"
    assert {p.metadata.annotations.get(t.DOMAIN_ANNOTATION) for p in pods} == {f"{BLOCK}=b2"}
    # b2 has 4 cores left in each rack, b1 holds one slice: a second gang of 8 waits, all gated
    indexed_job(kube, namespace, "sl2", 8, asked)
    waiting(kube, namespace, "sl2", "block: no block holds 8",
            "b1 fits 4 (1 of 2 slices of 4 placed, each in one rack; slice 1 (ranks 4-7) fits no rack of it)",
            reason="InsufficientCapacity")
    hold_gated(kube, namespace, "sl2", 2.0, 8)


def test_balanced_split_evenly_across_the_fewest_racks(stack, kube, namespace):
    """Racks of 2 nodes (4 members of 2 cores each); a gang of 6, required block, preferred rack: packed
    it would be 4+2; balanced it runs 3+3 in two racks, and the condition says so."""
    where = labelled_nodes(kube, {"b1": {"e1": 2, "e2": 2, "e3": 2}})  # names of their own (see above)
    gang(kube, namespace, "even", 6, {t.LEVELS: LEVELS, t.REQUIRED: BLOCK, t.PREFERRED: RACK, t.BALANCED: "true"})
    placed(kube, namespace, "even", 6, where)
    per_rack: dict[str, int] = {}
    for p in group_pods(kube, namespace, "even"):
        per_rack[where[p.spec.node_name][1]] = per_rack.get(where[p.spec.node_name][1], 0) + 1
    assert sorted(per_rack.values()) == [3, 3], per_rack
    cond = condition(status(kube, namespace, "even"), "Released")
    assert "split 3+3 across racks" in cond["message"] and "in block b1" in cond["message"], cond


#: Kueue's Topology API as far as cogate reads it (``kueue.x-k8s.io/v1beta2``, cluster-scoped,
#: ``spec.levels[].nodeLabel``): the CRD is registered here, not by a Kueue install (Kueue is not
#: built for the e2e suite); the controller reads the objects, whatever serves them.
TOPOLOGY_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "topologies.kueue.x-k8s.io"},
    "spec": {"group": "kueue.x-k8s.io", "scope": "Cluster",
             "names": {"kind": "Topology", "listKind": "TopologyList", "plural": "topologies", "singular": "topology"},
             "versions": [{"name": "v1beta2", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "properties": {"spec": {"type": "object", "properties": {"levels": {
                     "type": "array", "items": {"type": "object", "required": ["nodeLabel"],
                                                "properties": {"nodeLabel": {"type": "string"}}}}}}}}}}]}}


def _gone_restarts(stack) -> float:
    """``cogate_controller_watch_restarts_total`` of the Kueue Topology informer for reason ``gone``."""
    for line in stack.metrics("controller").splitlines():
        if line.startswith("cogate_controller_watch_restarts_total{") and 'informer="kueue-topologies"' in line \
                and 'reason="gone"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_kueue_topology_created_after_the_controller_started(stack, kube, namespace):
    """The controller starts without the Topology CRD; the CRD and a Topology (block, rack) are created
    later: within the poll the controller lists it, and a gang whose members carry Kueue's preferred
    rack widens to one block (the Topology's coarser level), not to the whole cluster."""
    from kubernetes.client import ApiextensionsV1Api, CustomObjectsApi

    where = labelled_nodes(kube, {"b1": {"r1": 1, "r2": 1}, "b2": {"r3": 1, "r4": 1, "r5": 1}})
    ext, custom = ApiextensionsV1Api(kube), CustomObjectsApi(kube)
    with controller_flags(stack):  # a controller started while the CRD is not served
        before = _gone_restarts(stack)
        ext.create_custom_resource_definition(TOPOLOGY_CRD)
        try:
            wait_for(lambda: any(c.type == "Established" and c.status == "True" for c in
                                 (ext.read_custom_resource_definition(TOPOLOGY_CRD["metadata"]["name"]).status.conditions
                                  or [])), 30, what="Topology CRD established")
            custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "topologies", {
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "racks"},
                "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}]}})
            wait_for(lambda: _gone_restarts(stack) > before, 40, what="the controller listing Topologies again")
            time.sleep(1.0)
            gang(kube, namespace, "kt", 4, {}, member_annotations={t.KUEUE_PREFERRED: RACK})
            assert {b for b, _ in placed(kube, namespace, "kt", 4, where)} == {"b1"}
            cond = condition(status(kube, namespace, "kt"), "Released")
            assert "in block b1 (wider than the preferred rack" in cond["message"], cond
        finally:
            ext.delete_custom_resource_definition(TOPOLOGY_CRD["metadata"]["name"])


def test_exclusive_gang_alone_in_its_rack_until_its_pods_go(stack, kube, namespace):
    """Racks x1 and x2 of 2 nodes (8 cores each; names of their own, see above). Gang ``other`` (1 x 2
    cores, required rack) goes to x1 (a tie: by name). The exclusive gang (3 x 2 cores) would fit x1
    best (6 cores free, none left over) but x1 holds a member of ``other``: it runs in x2. A later gang
    (1 x 2 cores, required rack) would fit x2 best (2 cores left) but x2 is held: it runs in x1. A gang
    without topology (3 x 2 cores) fits the cluster (4 cores in x1, 2 in x2) only using x2: it waits,
    saying the nodes are held, and runs once the exclusive gang's pods are deleted."""
    where = labelled_nodes(kube, {"b1": {"x1": 2, "x2": 2}})
    rack = {t.LEVELS: LEVELS, t.REQUIRED: RACK}
    gang(kube, namespace, "other", 1, rack)
    assert placed(kube, namespace, "other", 1, where) == {("b1", "x1")}
    gang(kube, namespace, "excl", 3, {**rack, t.EXCLUSIVE: "true"})
    assert placed(kube, namespace, "excl", 3, where) == {("b1", "x2")}
    gang(kube, namespace, "later", 1, rack)
    assert placed(kube, namespace, "later", 1, where) == {("b1", "x1")}
    gang(kube, namespace, "plain", 3, {})
    cond = waiting(kube, namespace, "plain", f"2 nodes held by exclusive PodGroup {namespace}/excl",
                   reason="InsufficientCapacity")
    assert cond["message"].startswith("fits 2 of 3"), cond
    hold_gated(kube, namespace, "plain", 2.0, 3)
    core = client.CoreV1Api(kube)
    for p in group_pods(kube, namespace, "excl"):
        core.delete_namespaced_pod(p.metadata.name, namespace, grace_period_seconds=0)
    assert ("b1", "x2") in placed(kube, namespace, "plain", 3, where)


def test_exclusive_gang_waits_while_every_rack_holds_another_gang(stack, kube, namespace):
    """Racks y1 and y2 of 1 node (4 cores), each running one member (3 cores) of another gang: the
    exclusive gang (1 x 1 core) would fit either, yet waits InsufficientCapacity naming each rack and its gang; it
    runs once one of those gangs' pods is deleted."""
    where = labelled_nodes(kube, {"b1": {"y1": 1, "y2": 1}})
    rack = {t.LEVELS: LEVELS, t.REQUIRED: RACK}
    for name in ("o1", "o2"):
        gang(kube, namespace, name, 1, rack, cpu="3")
        placed(kube, namespace, name, 1, where)
    homes = {name: where[group_pods(kube, namespace, name)[0].spec.node_name][1] for name in ("o1", "o2")}
    assert sorted(homes.values()) == ["y1", "y2"], homes
    gang(kube, namespace, "alone", 1, {**rack, t.EXCLUSIVE: "true"}, cpu="1")
    waiting(kube, namespace, "alone", *(f"{r} refused (holds members of PodGroup {namespace}/{n})"
                                        for n, r in homes.items()), reason="InsufficientCapacity")
    hold_gated(kube, namespace, "alone", 2.0, 1)
    core = client.CoreV1Api(kube)
    core.delete_namespaced_pod(group_pods(kube, namespace, "o2")[0].metadata.name, namespace, grace_period_seconds=0)
    assert placed(kube, namespace, "alone", 1, where) == {("b1", homes["o2"])}


def test_two_exclusive_gangs_created_together_take_two_racks(stack, kube, namespace):
    """Racks z1 and z2 of 2 nodes (8 cores): two exclusive gangs of 2 x 2 cores, created back to back
    (planned in one pass or two), would both fit z1; they run in different racks."""
    where = labelled_nodes(kube, {"b1": {"z1": 2, "z2": 2}})
    asked = {t.LEVELS: LEVELS, t.REQUIRED: RACK, t.EXCLUSIVE: "true"}
    gang(kube, namespace, "e1", 2, asked)
    gang(kube, namespace, "e2", 2, asked)
    first, second = placed(kube, namespace, "e1", 2, where), placed(kube, namespace, "e2", 2, where)
    assert len(first) == len(second) == 1 and first != second, (first, second)


def test_preemption_never_enters_an_exclusive_gangs_rack(stack, kube, namespace):
    """Racks p1 and p2 of 2 nodes (4 cores). The exclusive gang ``ex`` (priority 100, 2 x 4 cores) runs
    in p1; plain pods of priority 500 fill p2. A gang of priority 1000 (2 x 4 cores, no topology) needs
    victims: by priority alone they would be ex's members, but it could not be placed in ex's rack
    while ex runs, so its victims are the plain pods of p2; it runs there and ex runs on."""
    from .kube import priority_classes

    where = labelled_nodes(kube, {"b1": {"p1": 2, "p2": 2}})
    core = client.CoreV1Api(kube)
    with priority_classes(kube, low=100, mid=500, high=1000) as names:
        gang(kube, namespace, "ex", 2, {t.LEVELS: LEVELS, t.REQUIRED: RACK, t.EXCLUSIVE: "true"}, cpu="4",
             priority_class=names["low"])
        assert placed(kube, namespace, "ex", 2, where) == {("b1", "p1")}
        _run_on(core, namespace, "mid", names["mid"], ("p2-0", "p2-1"))
        gang(kube, namespace, "vip", 2, {}, cpu="4", priority_class=names["high"])
        assert placed(kube, namespace, "vip", 2, where) == {("b1", "p2")}
        assert sum(running(p) and not p.metadata.deletion_timestamp for p in group_pods(kube, namespace, "ex")) == 2
