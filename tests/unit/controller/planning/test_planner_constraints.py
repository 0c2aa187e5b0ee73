"""Constraints beyond resources (issue 9 items 6 and 7): bound PVs' node affinity, claims that
keep a group gated, unchecked constraints and their policy, in-place resizes, DaemonSet pods
not yet bound, and scheduler names. Pure: controller/model/volumes.py, resources.py, planner.py."""

from __future__ import annotations

import copy

import pytest

from cogate.api import POD_GROUP_LABEL
from cogate.controller.model import volumes
from cogate.controller.model.records import pod_info
from cogate.controller.planning.planner import GroupRequest, Outcome, PlannerConfig, decide
from cogate.controller.status.inputs import resolve_volumes
from cogate.controller.model.resources import QuantityError, effective_request
from tests.builders import node, pod

HOST = "kubernetes.io/hostname"


def raw_pod(name, cpu="2", *, claim=None, ephemeral=None, node_name="", gated=True, scheduler=None, status=None,
            extra=None):
    b = pod(name, "default").req(cpu=cpu).created(0)
    b.labels({POD_GROUP_LABEL: "g"} if not node_name else {"app": "other"})
    if gated and not node_name:
        b.gated()
    if node_name:
        b.on(node_name)
    vols = []
    if claim:
        vols.append({"name": "data", "persistentVolumeClaim": {"claimName": claim}})
    if ephemeral:
        vols.append({"name": ephemeral, "ephemeral": {"volumeClaimTemplate": {"spec": {}}}})
    if vols:
        b.spec(volumes=vols)
    if scheduler:
        b.spec(schedulerName=scheduler)
    raw = b.spec(**(extra or {})).raw()
    if status:
        raw["status"] = status
    return raw


def pvc(name, volume="", *, bound=True, phase="Bound", deleting=False):
    meta = {"name": name, "namespace": "default"}
    if bound and volume:
        meta["annotations"] = {volumes.BIND_COMPLETED: "yes"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return volumes.claim_info({"metadata": meta, "spec": {"volumeName": volume}, "status": {"phase": phase}})


def local_pv(name, node_name, key=HOST):
    return volumes.volume_info({"metadata": {"name": name}, "spec": {"nodeAffinity": {"required": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": [node_name]}]}]}}}})


def run(nodes, members, min_member, bound=(), cfg=PlannerConfig(), released=False):
    g = GroupRequest("default", "g", min_member, 0.0, released, tuple(members))
    return decide(nodes, list(bound), [g], [], 1000.0, cfg)


# -- bound PVs' node affinity (kube-scheduler VolumeBinding) ----------------------------


def test_bound_local_pvs_on_the_busy_node_keep_the_group_gated():
    # n1, n2 of 8 CPU; a 6-CPU pod on n2; both members' claims are bound to local PVs on n2:
    # only one 2-CPU member fits on n2, so the group must not be released (half-placed before)
    nodes = [node("n1").alloc(cpu=8, memory="64Gi").info(), node("n2").alloc(cpu=8, memory="64Gi").info()]
    busy = pod_info(raw_pod("busy", "6", node_name="n2"))
    claims = {("default", f"data-{i}"): pvc(f"data-{i}", f"pv-{i}") for i in range(2)}
    pvs = {f"pv-{i}": local_pv(f"pv-{i}", "n2") for i in range(2)}
    ms = resolve_volumes([pod_info(raw_pod(f"m{i}", claim=f"data-{i}")) for i in range(2)], claims, pvs)
    assert all(m.unplanned == () and m.volume_node_affinity for m in ms)
    d = run(nodes, ms, 2, bound=[busy])
    v = d.verdicts[0]
    assert v.outcome == Outcome.INSUFFICIENT_CAPACITY and v.release == {}
    assert "volume node affinity" in v.message
    # without the busy pod both fit on n2, released pinned there (and reserved)
    d = run(nodes, ms, 2)
    assert d.verdicts[0].outcome == Outcome.RELEASED
    assert set(d.verdicts[0].release.values()) == {"n2"}
    assert {r.node_name for r in d.reservations} == {"n2"}


def test_pv_affinity_is_matched_against_node_labels_only():
    # CheckNodeAffinity builds a node from the labels alone: matchFields on metadata.name never match
    pv = volumes.volume_info({"metadata": {"name": "pv"}, "spec": {"nodeAffinity": {"required": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}})
    m = volumes.resolve(pod_info(raw_pod("m", claim="c")), {("default", "c"): pvc("c", "pv")}, {"pv": pv})
    assert volumes.node_reason(node("n1").alloc(cpu=8, memory="64Gi").info(), m) == volumes.REASON
    # a PV without node affinity allows every node
    m = volumes.resolve(pod_info(raw_pod("m", claim="c")), {("default", "c"): pvc("c", "pv")},
                        {"pv": volumes.volume_info({"metadata": {"name": "pv"}, "spec": {}})})
    assert m.volume_node_affinity == () and volumes.node_reason(node("n1").alloc(cpu=8, memory="64Gi").info(), m) is None


@pytest.mark.parametrize("claims,pvs,problem", [
    ({}, {}, "persistentvolumeclaim 'data' not found"),
    ({("default", "data"): pvc("data", "pv", deleting=True)}, {"pv": local_pv("pv", "n1")}, "is being deleted"),
    ({("default", "data"): pvc("data", "pv", phase="Lost")}, {}, "bound to non-existent persistentvolume 'pv'"),
    ({("default", "data"): pvc("data", "pv", bound=False)}, {"pv": local_pv("pv", "n1")}, "is not bound yet"),
    ({("default", "data"): pvc("data", "pv")}, {}, "persistentvolume 'pv' of claim 'data' not found"),
])
def test_a_claim_kube_scheduler_cannot_use_keeps_the_group_gated_with_that_reason(claims, pvs, problem):
    m = resolve_volumes([pod_info(raw_pod("m0", claim="data"))], claims, pvs)[0]
    other = pod_info(raw_pod("m1"))
    v = run([node("n1").alloc(cpu=8, memory="64Gi").info(),
             node("n2").alloc(cpu=8, memory="64Gi").info()], [m, other], 2).verdicts[0]
    assert v.outcome == Outcome.UNSCHEDULABLE and v.release == {}
    assert "m0: " in v.message and problem in v.message


def test_missing_ephemeral_claim_is_named_and_resolves_by_pod_and_volume_name():
    p = pod_info(raw_pod("m0", ephemeral="scratch"))
    assert p.volume_claims == ("m0-scratch",)
    m = volumes.resolve(p, {}, {})
    assert "'m0-scratch' not found" in m.volume_problems[0] and "ephemeral" in m.volume_problems[0]


def test_unbound_claims_are_unchecked_released_unpinned_unreserved_and_named():
    claims = {("default", "data"): pvc("data", "")}  # WaitForFirstConsumer: kube-scheduler binds it
    m = resolve_volumes([pod_info(raw_pod("m0", claim="data"))], claims, {})[0]
    assert m.unplanned == ("unbound volume claim data",)
    other = pod_info(raw_pod("m1"))
    d = run([node("n1").alloc(cpu=8, memory="64Gi").info()], [m, other], 2)
    v = d.verdicts[0]
    assert v.outcome == Outcome.RELEASED
    assert v.release == {m.uid: "", other.uid: "n1"}
    assert {r.pod_uid for r in d.reservations} == {other.uid}
    assert "not checked by cogate" in v.message and "m0 (unbound volume claim data)" in v.message
    # hold: the group stays gated and the message names member and constraint
    v = run([node("n1").alloc(cpu=8, memory="64Gi").info()],
            [m, other], 2, cfg=PlannerConfig(unchecked="hold")).verdicts[0]
    assert v.outcome == Outcome.UNSCHEDULABLE and v.release == {}
    assert "m0 has constraints cogate does not check (unbound volume claim data)" in v.message


def test_dra_resource_claims_not_resolved_hold_by_default():
    """Claims not resolved against the DRA informers (an API server without resource.k8s.io/v1):
    held by default (hold-devices) and by hold; released unpinned, named, by release."""
    m = pod_info(raw_pod("m0", extra={"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu"}]}))
    assert m.unplanned == ("resource claims",)
    for cfg in (PlannerConfig(), PlannerConfig(unchecked="hold")):
        v = run([node("n1").alloc(cpu=8, memory="64Gi").info()], [m], 1, cfg=cfg).verdicts[0]
        assert v.outcome == Outcome.UNSCHEDULABLE and v.release == {}
        assert v.message.endswith(f"m0 has constraints cogate does not check (resource claims) and "
                                  f"--unchecked-constraints={cfg.unchecked} (release them unchecked, with the risk "
                                  "that kube-scheduler places part of the group, with --unchecked-constraints=release)")
    v = run([node("n1").alloc(cpu=8, memory="64Gi").info()], [m], 1, cfg=PlannerConfig(unchecked="release")).verdicts[0]
    assert v.outcome == Outcome.RELEASED and v.release == {m.uid: ""} and "resource claims" in v.message


def test_unbound_volume_claims_are_released_by_default_and_held_by_hold():
    m = pod_info(raw_pod("m0", claim="data"))
    m = resolve_volumes([m], {("default", "data"): pvc("data")}, {})[0]
    assert m.unplanned == ("unbound volume claim data",)
    assert run([node("n1").alloc(cpu=8, memory="64Gi").info()], [m], 1).verdicts[0].outcome == Outcome.RELEASED
    assert run([node("n1").alloc(cpu=8, memory="64Gi").info()],
               [m], 1, cfg=PlannerConfig(unchecked="hold")).verdicts[0].outcome == Outcome.UNSCHEDULABLE


def test_without_claim_informers_claims_stay_unchecked():
    m = pod_info(raw_pod("m0", claim="data"))
    assert resolve_volumes([m], None, None) == [m] and m.unplanned == ("volume claims",)


def test_claim_and_volume_parsing_rejects_bad_shapes():
    with pytest.raises(ValueError, match="spec.volumeName"):
        volumes.claim_info({"metadata": {"name": "c"}, "spec": {"volumeName": 3}})
    with pytest.raises(ValueError, match="nodeSelectorTerms"):
        volumes.volume_info({"metadata": {"name": "v"}, "spec": {"nodeAffinity": {"required": {
            "nodeSelectorTerms": "n1"}}}})


# -- in-place resize (InPlacePodVerticalScaling) ----------------------------------------


def resized_status(actual, allocated, reason=None):
    st = {"phase": "Running", "containerStatuses": [{"name": "c", "allocatedResources": {"cpu": allocated},
                                                     "resources": {"requests": {"cpu": actual}}}]}
    if reason:
        st["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": reason}]
    return st


@pytest.mark.parametrize("spec_cpu,actual,allocated,reason,expected", [
    ("6", "2", "2", None, 6000),           # resize pending/in progress: the larger (spec)
    ("6", "2", "2", "Deferred", 6000),     # deferred: still the desired size
    ("6", "2", "2", "Infeasible", 2000),   # infeasible: the spec is ignored
    ("1", "2", "2", None, 2000),           # shrinking: actual still larger
    ("1", "2", "3", "Infeasible", 3000),   # the larger of actual and allocated
    ("4", "2", "4", None, 4000),
])
def test_resize_counts_as_kube_scheduler_does(spec_cpu, actual, allocated, reason, expected):
    raw = raw_pod("p", spec_cpu, node_name="n1", status=resized_status(actual, allocated, reason))
    assert pod_info(raw).requests["cpu"] == expected


def test_resize_without_status_resources_uses_the_spec_and_sidecars_resize_too():
    raw = raw_pod("p", "6", node_name="n1", status={"phase": "Running", "containerStatuses": [
        {"name": "c", "allocatedResources": {"cpu": "8"}}]})
    assert pod_info(raw).requests["cpu"] == 6000  # no status.resources: spec only (determineContainerReqs)
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            "initContainers": [{"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                               {"name": "init", "resources": {"requests": {"cpu": "1"}}}]}
    status = {"initContainerStatuses": [{"name": "side", "resources": {"requests": {"cpu": "3"}}},
                                        {"name": "init", "resources": {"requests": {"cpu": "9"}}}]}
    # the sidecar counts 3 (actual), the plain init container keeps its spec
    assert effective_request(spec, status)["cpu"] == 4000
    with pytest.raises(QuantityError, match="allocatedResources.cpu"):
        effective_request({"containers": [{"name": "c"}]},
                          {"containerStatuses": [{"name": "c", "resources": {}, "allocatedResources": {"cpu": "x"}}]})


def test_infeasible_resize_does_not_hold_a_group_kube_scheduler_would_place():
    # 8-CPU node; a running pod of 2 CPU asked to grow to 6, resize Infeasible: kube-scheduler counts 2,
    # so two 3-CPU members fit
    busy = pod_info(raw_pod("busy", "6", node_name="n1", status=resized_status("2", "2", "Infeasible")))
    ms = [pod_info(raw_pod(f"m{i}", "3")) for i in range(2)]
    assert run([node("n1").alloc(cpu=8, memory="64Gi").info()],
               ms, 2, bound=[busy]).verdicts[0].outcome == Outcome.RELEASED
    pending = pod_info(raw_pod("busy", "6", node_name="n1", status=resized_status("2", "2")))
    assert run([node("n1").alloc(cpu=8, memory="64Gi").info()],
               ms, 2, bound=[pending]).verdicts[0].outcome == Outcome.INSUFFICIENT_CAPACITY


# -- DaemonSet pods not yet bound -------------------------------------------------------


def test_a_daemonset_pod_counts_once_bound_as_in_kube_scheduler():
    # kube-scheduler's NodeResourcesFit counts pods in its cache: bound (and assumed) ones; a
    # DaemonSet pod created for a new node but not bound yet takes no room there
    ds = copy.deepcopy(raw_pod("ds-x", "6", gated=False))
    ds["metadata"]["labels"] = {"app": "ds"}
    ds["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}
    ms = [pod_info(raw_pod(f"m{i}", "3")) for i in range(2)]
    assert run([node("n1").alloc(cpu=8, memory="64Gi").info()],
               ms, 2, bound=[pod_info(ds)]).verdicts[0].outcome == Outcome.RELEASED
    ds["spec"]["nodeName"] = "n1"
    ds["status"] = {"phase": "Running"}
    assert run([node("n1").alloc(cpu=8, memory="64Gi").info()],
               ms, 2, bound=[pod_info(ds)]).verdicts[0].outcome == Outcome.INSUFFICIENT_CAPACITY


# -- scheduler names (item 7) -----------------------------------------------------------


def test_members_of_an_unknown_scheduler_hold_the_group_and_are_named():
    ms = [pod_info(raw_pod(f"m{i}", scheduler="other-scheduler")) for i in range(2)]
    d = run([node("n1").alloc(cpu=8, memory="64Gi").info()], ms, 2)
    v = d.verdicts[0]
    assert v.outcome == Outcome.UNSCHEDULABLE and v.release == {} and d.reservations == ()
    assert "m0, m1 name scheduler 'other-scheduler'" in v.message and "--scheduler-name" in v.message
    # the name cannot change after creation: the hint names the webhook's adoption and recreating the pods
    assert "--adopt-scheduler-name and recreate the pods" in v.message


def test_members_of_another_configured_scheduler_are_released_unpinned_and_unreserved():
    cfg = PlannerConfig(scheduler_names=frozenset({"default-scheduler", "other-scheduler"}))
    ms = [pod_info(raw_pod("m0", scheduler="other-scheduler")), pod_info(raw_pod("m1"))]
    d = run([node("n1").alloc(cpu=8, memory="64Gi").info()], ms, 2, cfg=cfg)
    v = d.verdicts[0]
    assert v.outcome == Outcome.RELEASED
    assert v.release == {"uid-m0": "", "uid-m1": "n1"}
    assert [r.pod_uid for r in d.reservations] == ["uid-m1"]
    assert "placed by their own scheduler: m0" in v.message


def test_released_groups_new_members_follow_the_same_pin_rule():
    cfg = PlannerConfig(scheduler_names=frozenset({"default-scheduler", "other-scheduler"}))
    ms = [pod_info(raw_pod("m0", scheduler="other-scheduler")), pod_info(raw_pod("m1"))]
    d = run([node("n1").alloc(cpu=8, memory="64Gi").info()], ms, 2, cfg=cfg, released=True)
    assert d.verdicts[0].release == {"uid-m0": "", "uid-m1": "n1"}
    assert [r.pod_uid for r in d.reservations] == ["uid-m1"]



# -- the shell resolves claims from its PVC and PV informers ------------------------------


def test_reconciler_hands_the_planner_members_with_resolved_volumes():
    from tests.builders import Harness, informer, raw_pg, raw_pod as rec_pod, verdict

    from cogate.controller.kube.informer import name_key, namespaced_key

    a = rec_pod("a")
    a["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data-a"}}]
    h = Harness([a, rec_pod("b")], [raw_pg()], [verdict("WaitingForMembers")])
    ns = a["metadata"]["namespace"]
    h.caches.claims = informer("pvc", [{"metadata": {"name": "data-a", "namespace": ns, "annotations": {
        volumes.BIND_COMPLETED: "yes"}}, "spec": {"volumeName": "pv-a"}, "status": {"phase": "Bound"}}],
        namespaced_key, volumes.claim_info)
    h.caches.volumes = informer("pv", [{"metadata": {"name": "pv-a"}, "spec": {"nodeAffinity": {"required": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": HOST, "operator": "In", "values": ["n1"]}]}]}}}}],
        name_key, volumes.volume_info)
    assert h.caches.claims in h.caches.all() and h.caches.volumes in h.caches.all()
    h.run()
    (g,) = h.decide_calls[0]["groups"]
    ma = next(m for m in g.members if m.name == "a")
    assert ma.unplanned == () and ma.volume_problems == ()
    assert ma.volume_node_affinity[0][0].match_expressions[0].values == ("n1",)


def test_a_new_member_of_a_released_group_with_a_missing_claim_is_not_pinned():
    m = resolve_volumes([pod_info(raw_pod("m0", claim="data"))], {}, {})[0]
    d = run([node("n1").alloc(cpu=8, memory="64Gi").info()], [m], 1, released=True)
    assert d.verdicts[0].release == {m.uid: ""} and d.reservations == ()
