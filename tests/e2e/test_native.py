"""cogate beside Kubernetes' own gang scheduling (issue 18 item 3), on the real control plane.

Pods that carry cogate's label *and* ``spec.schedulingGroup`` go through the stack's real webhook
like any member: gated at admission, with one more warning on kubectl's stderr (the webhook cannot
know whether the field survives admission). What is stored decides:

- GenericWorkload off (the default; 1.36.3, 1.37.2): the API server drops ``spec.schedulingGroup``
  after admission, so the pods are ordinary members: they stay gated while their group does not fit
  and are released with it, never bound alone.
- A release without the field (1.30.14): kubectl's strict field validation refuses it ("unknown
  field"); created with ``--validate=false`` the API server drops it while decoding, before
  admission, so there is no warning and the pods are ordinary members as above.
- GenericWorkload on (``COGATE_KUBERNETES_VERSION=1.37.2 COGATE_FEATURE_GATES=GenericWorkload=true``):
  the field is kept, so they are no members: cogate removes its gate (Normal ``NativeGangScheduling``
  on each pod) and kube-scheduler's gang scheduling binds them (a ``scheduling.k8s.io`` PodGroup of
  ``gang.minCount`` 2); cogate's PodGroup of the same label waits, saying it ignores them. ``kubectl
  get podgroups`` then names the core resource and ``kubectl get pg`` cogate's.
"""

from __future__ import annotations

import json

import pytest
from kubernetes import client

from cogate import api
from cogate.localcluster import example

from .kube import bound, condition, create_pod_group, events_for, gated, group_pods, hold_gated, status, wait_for

pytestmark = pytest.mark.e2e

NODE = dict(kwok_taint=False, **example.NODE_SHAPE)


def _native_api(cluster) -> str:
    """The ``scheduling.k8s.io`` version serving PodGroups ('' when none: GenericWorkload off)."""
    versions = cluster.kubectl("api-versions").stdout.split()
    return next((v for v in ("scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha2") if v in versions), "")


#: Two of these do not fit one node of :data:`NODE` (10 CPU).
CPU = "6"


def _pod(name: str, namespace: str, group: str, native_group: str) -> dict:
    tpl = example.pod_template(group, cpu=CPU, memory="100Mi", app=f"native-{name}")
    tpl["spec"]["schedulingGroup"] = {"podGroupName": native_group}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, **tpl["metadata"]},
            "spec": tpl["spec"]}


def _ours(raw: dict) -> bool:
    """Whether the pod (API JSON) carries cogate's gate."""
    return any(g.get("name") == api.DEFAULT_GATE_NAME for g in raw["spec"].get("schedulingGates") or [])


def test_labelled_pods_with_a_scheduling_group_are_members_unless_the_api_server_keeps_the_field(
        stack, cluster, kube, namespace, only_nodes):
    native = _native_api(cluster)
    # the local control plane's GenericWorkload setting serves the native API, or not
    assert bool(native) == cluster.feature_gates.get("GenericWorkload", False), (native, cluster.feature_gates)
    only_nodes(2 if native else 1, **NODE)  # native: room for both; off: cogate's group does not fit yet
    create_pod_group(kube, example.pod_group("train", 2, namespace=namespace, timeout_seconds=None))
    if native:
        group, version = native.split("/")
        client.CustomObjectsApi(kube).create_namespaced_custom_object(group, version, namespace, "podgroups", {
            "apiVersion": native, "kind": "PodGroup", "metadata": {"name": "native"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}})
    created = {}
    known = True  # the release knows spec.schedulingGroup (1.36+)
    for name in ("n-0", "n-1"):
        create = ("create", "-n", namespace, "-o", "json", "-f", "-")
        manifest = json.dumps(_pod(name, namespace, "train", "native"))
        proc = cluster.kubectl(*create, input=manifest, check=False)
        if proc.returncode and 'strict decoding error: unknown field "spec.schedulingGroup"' in proc.stderr:
            # an older release (1.30): kubectl's strict field validation refuses the unknown field; without
            # it the API server drops the field while decoding, before admission: the webhook never sees it
            known = False
            proc = cluster.kubectl(*create, "--validate=false", input=manifest, check=False)
        assert proc.returncode == 0, proc.stderr
        assert (("spec.schedulingGroup set: if Kubernetes gang scheduling is on, it places the pod and cogate "
                 "removes its gate") in proc.stderr) is known, proc.stderr
        created[name] = json.loads(proc.stdout)  # as stored at creation
    assert known or not native, "an API server serving scheduling.k8s.io PodGroups knows spec.schedulingGroup"
    assert all(_ours(r) for r in created.values()), created  # gated at admission, like any member
    if not native:
        # GenericWorkload off: the API server dropped the field after admission (dropDisabledSchedulingGroup),
        # or before it (a release without the field): ordinary members, gated until the group fits, then
        # released together
        assert all("schedulingGroup" not in r["spec"] for r in created.values()), created
        short = wait_for(lambda: (c := condition(status(kube, namespace, "train"), "Released"))
                         and c["reason"] == "InsufficientCapacity" and c, 30, what="cogate's group does not fit")
        assert short["status"] == "False", short
        hold_gated(kube, namespace, "train", 5, 2)  # neither is bound alone
        only_nodes(2, **NODE)
        pods = wait_for(lambda: (ps := group_pods(kube, namespace, "train")) and len(ps) == 2
                        and all(bound(p) for p in ps) and ps, 60, what="both members released and bound")
        assert len({p.spec.node_name for p in pods}) == 2
        wait_for(lambda: (c := condition(status(kube, namespace, "train"), "Released")) and c["status"] == "True"
                 and c["reason"] == "Released", 30, what="cogate's group released")
        disrupted = condition(status(kube, namespace, "train"), "Disrupted")
        assert disrupted is None or disrupted["status"] == "False", disrupted  # no UngatedWithoutRelease
        assert not any(e.reason == "NativeGangScheduling" for n in created for e in events_for(kube, namespace, n, "Pod"))
        return
    assert all(r["spec"]["schedulingGroup"] == {"podGroupName": "native"} for r in created.values()), created
    # GenericWorkload on: the field is kept, so they are no members: cogate removes its gate, native binds them
    pods = wait_for(lambda: (ps := group_pods(kube, namespace, "train")) and len(ps) == 2
                    and all(bound(p) for p in ps) and ps, 60, what="both pods bound by native gang scheduling")
    assert not any(gated(p) for p in pods)
    for name in created:
        (event,) = wait_for(lambda n=name: [e for e in events_for(kube, namespace, n, "Pod")
                                            if e.reason == "NativeGangScheduling"], 30,
                            what=f"NativeGangScheduling on {name}")
        assert event.type == "Normal" and event.message.startswith("spec.schedulingGroup kept by the API server: "
                                                                   "Kubernetes' own gang scheduling places the pod"), event

    def ignored():
        released = condition(status(kube, namespace, "train"), "Released")
        return released if released and "2 labelled pods ignored" in released.get("message", "") else None

    released = wait_for(ignored, 30, what="cogate's PodGroup saying it ignores the native pods")
    assert (released["status"], released["reason"]) == ("False", "WaitingForMembers"), released
    assert "(spec.schedulingGroup set): n-0, n-1" in released["message"], released
    # `kubectl get podgroups` is the core resource now; `pg` and the full name stay cogate's
    core = json.loads(cluster.kubectl("get", "podgroups", "-n", namespace, "-o", "json").stdout)
    assert [(i["apiVersion"], i["metadata"]["name"]) for i in core["items"]] == [(native, "native")]
    for name in ("pg", f"{api.PLURAL}.{api.GROUP}"):
        ours = json.loads(cluster.kubectl("get", name, "-n", namespace, "-o", "json").stdout)
        assert [(i["apiVersion"], i["metadata"]["name"]) for i in ours["items"]] == [(api.API_VERSION, "train")]
